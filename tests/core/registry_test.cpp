#include <gtest/gtest.h>

#include <atomic>

#include "dlock/dlock.hpp"
#include "test_backend.hpp"

namespace {

using namespace dlock;

struct registry_fixture : ::testing::Test {
  registry r;
  std::atomic<int> opened{0};
  void SetUp() override {
    r.add({.scheme = "alpha", .caps = {capability::expiring}, .scope = lock_scope::network,
           .example_uri = "alpha://127.0.0.1:1", .summary = "a", .parameters = {"db"},
           .open = [this](const uri&, const lock_options& o) {
             ++opened;
             return std::make_shared<core_test::test_backend>(capabilities{capability::expiring}, o);
           }});
    r.add({.scheme = "beta", .caps = {}, .scope = lock_scope::host, .example_uri = "beta:///tmp/x", .summary = "b",
           .parameters = {}, .open = [this](const uri&, const lock_options& o) {
             ++opened;
             return std::make_shared<core_test::test_backend>(capabilities{}, o);
           }});
  }
  std::pair<std::error_code, std::string> fail(std::string_view text, capabilities required = {}) {
    std::error_code ec;
    auto b = r.open(text, required, ec);
    EXPECT_FALSE(b);
    std::string thrown;
    try {
      (void)r.open(text, required);
    } catch (const dlock::error& e) {
      thrown = e.what();
    }
    // std::system_error appends ": <category message>" to what().
    EXPECT_TRUE(thrown.starts_with(last_error_message())) << thrown << "\n vs \n" << last_error_message();
    return {ec, thrown};
  }
};

TEST_F(registry_fixture, UnknownSchemeListsBuiltInSchemesWithExamples) {
  const auto [ec, msg] = fail("gamma://h");
  EXPECT_EQ(ec, errc::unknown_scheme);
  for (const char* s : {"gamma", "alpha", "alpha://127.0.0.1:1", "beta", "beta:///tmp/x"})
    EXPECT_NE(msg.find(s), std::string::npos) << s << " missing in: " << msg;
}

TEST_F(registry_fixture, UnknownParameterIsNamedWithTheAcceptedOnes) {
  const auto [ec, msg] = fail("alpha://h/?bogus=1");
  EXPECT_EQ(ec, errc::invalid_uri);
  for (const char* s : {"bogus", "ttl", "watchdog", "renew", "poll", "db"}) EXPECT_NE(msg.find(s), std::string::npos) << msg;
  EXPECT_EQ(opened, 0);
}

TEST_F(registry_fixture, MissingCapabilityRefusesBeforeConnecting) {
  const auto [ec, msg] = fail("alpha://h", {capability::fencing, capability::fair, capability::expiring});
  EXPECT_EQ(ec, errc::missing_capability);
  EXPECT_NE(msg.find("fencing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fair"), std::string::npos) << msg;
  EXPECT_EQ(opened, 0) << "open() connected although a capability was missing";
}

TEST_F(registry_fixture, OpensAndParsesCommonOptions) {
  auto b = r.open("alpha://h/?ttl=2s&watchdog=false&poll=5ms..50ms&db=1");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->default_options().ttl, std::chrono::seconds(2));
  EXPECT_FALSE(b->default_options().watchdog);
  EXPECT_EQ(b->default_options().poll.max, std::chrono::milliseconds(50));
  EXPECT_EQ(opened, 1);
}

TEST_F(registry_fixture, DuplicateSchemeIsRefused) {
  backend_info again;
  again.scheme = "alpha";
  EXPECT_THROW(r.add(again), dlock::error);
}

TEST_F(registry_fixture, PasswordNeverAppearsInAnyMessage) {
  const std::vector<std::string> texts = {
      "redis://user:S3cr3t-P%40ss@host:1/?bogus=1", "alpha://user:S3cr3t-P%40ss@host:1/?bogus=1",
      "alpha://user:S3cr3t@host:1/?ttl=soon", "alpha://user:S3cr3t@host:99999/", "redis://u:S3cr3t@@@:::/",
      "alpha://u:S3cr3t@h/#frag", "alpha://u:S3cr3t@h/?a=1&a=2", "alpha://u:S3cr3t@a:1,,b/x",
      "alpha://u:S3cr3t@h/?poll=x..y"};
  for (const auto& t : texts) {
    const auto [ec, msg] = fail(t, {});
    EXPECT_TRUE(ec) << t;
    EXPECT_EQ(msg.find("S3cr3t"), std::string::npos) << msg;
    EXPECT_EQ(last_error_message().find("S3cr3t"), std::string::npos) << last_error_message();
    const auto [ec2, msg2] = fail(t, {capability::fencing});
    EXPECT_EQ(msg2.find("S3cr3t"), std::string::npos) << msg2;
  }
  EXPECT_EQ(redact_uri_text("redis://u:S3cr3t@@@:::/").find("S3cr3t"), std::string::npos);
  EXPECT_NE(uri::parse("redis://u:S3cr3t@h").redacted().find("***"), std::string::npos);
}

TEST(DefaultRegistry, UnknownSchemeListsEveryBuiltInBackend) {
  std::string msg;
  try {
    (void)dlock::open("nosuchscheme://h");
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), errc::unknown_scheme);
    msg = e.what();
  }
  for (const auto& info : default_registry().list()) {
    EXPECT_NE(msg.find(info.scheme), std::string::npos) << msg;
    EXPECT_NE(msg.find(info.example_uri), std::string::npos) << msg;
  }
}

TEST(Names, EmptyAndOversizedAreInvalidAndStateTheLimit) {
  core_test::test_backend b({}, {}, 64);
  for (const std::string& name : {std::string(), std::string(65, 'x')}) {
    try {
      auto l = b.make_lock(name);
      ADD_FAILURE() << "accepted a name of " << name.size() << " bytes";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), errc::invalid_name);
      EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(b.make_lock(std::string(64, 'x')));
}

}  // namespace
