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
    r.add({.scheme = "alpha",
           .caps = {capability::expiring},
           .scope = lock_scope::network,
           .example_uri = "alpha://127.0.0.1:1",
           .summary = "a",
           .parameters = {"db"},
           .open = counting_open({capability::expiring})});
    r.add(plain_scheme("beta", lock_scope::host, "beta:///tmp/x", "b"));
  }
  // An open() that counts itself in `opened` and makes a test backend of `caps`.
  std::function<std::shared_ptr<backend>(const uri&, const lock_options&)> counting_open(capabilities caps = {}) {
    return [this, caps](const uri&, const lock_options& o) {
      ++opened;
      return std::make_shared<core_test::test_backend>(caps, o);
    };
  }
  // A scheme with no capabilities and no parameters of its own, opened by counting_open().
  backend_info plain_scheme(std::string scheme, lock_scope scope, std::string example_uri, std::string summary) {
    return {.scheme = std::move(scheme),
            .caps = {},
            .scope = scope,
            .example_uri = std::move(example_uri),
            .summary = std::move(summary),
            .parameters = {},
            .open = counting_open()};
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

TEST_F(registry_fixture, AServerSchemeNamesTheStrategiesOnIt) {
  r.add(plain_scheme("alpha+index", lock_scope::network, "alpha+index://h:1", "ai"));
  const auto [ec, msg] = fail("alpha+nothing://h");
  EXPECT_EQ(ec, errc::unknown_scheme);
  const auto [ec2, msg2] = fail("postgres://u:S3cr3t@h/db");
  EXPECT_EQ(ec2, errc::unknown_scheme);
  r.add(plain_scheme("postgres+advisory", lock_scope::network, "postgres+advisory://u:p@h/db", "pa"));
  const auto [ec3, msg3] = fail("postgres://u:S3cr3t@h/db");
  EXPECT_EQ(ec3, errc::unknown_scheme);
  EXPECT_NE(msg3.find("names a server"), std::string::npos) << msg3;
  EXPECT_NE(msg3.find("postgres+advisory"), std::string::npos) << msg3;
  EXPECT_EQ(msg3.find("S3cr3t"), std::string::npos) << msg3;
}

// A broken strategy kept to show how it fails opens only when the URI says so.
TEST_F(registry_fixture, AnUnsafeSchemeOpensOnlyWithUnsafeTrue) {
  auto broken = plain_scheme("alpha+broken", lock_scope::network, "alpha+broken://h:1?unsafe=true", "UNSAFE: x");
  broken.unsafe_because = "it deletes its successor's lock";
  r.add(broken);
  for (const char* text : {"alpha+broken://u:S3cr3t@h", "alpha+broken://u:S3cr3t@h?unsafe=false"}) {
    const auto [ec, msg] = fail(text);
    EXPECT_EQ(ec, errc::invalid_uri);
    EXPECT_NE(msg.find("UNSAFE"), std::string::npos) << msg;
    EXPECT_NE(msg.find("successor's lock"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unsafe=true"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("S3cr3t"), std::string::npos) << msg;
  }
  EXPECT_EQ(opened, 0);
  EXPECT_TRUE(r.open("alpha+broken://h?unsafe=true"));
  const auto [ec, msg] = fail("alpha://h?unsafe=true");
  EXPECT_EQ(ec, errc::invalid_uri) << "a safe scheme takes no unsafe parameter";
}

TEST_F(registry_fixture, ANetworkBackendWithNoHostIsRefusedBeforeConnecting) {
  const auto [ec, msg] = fail("alpha://?ttl=5s");
  EXPECT_EQ(ec, errc::invalid_uri);
  EXPECT_NE(msg.find("no host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("alpha://127.0.0.1:1"), std::string::npos) << "the example is shown: " << msg;
  EXPECT_EQ(opened, 0);
  std::error_code ec2;
  EXPECT_TRUE(r.open("beta:///tmp/x", {}, ec2)) << "a host-scoped backend needs no host: " << ec2.message();
}

TEST_F(registry_fixture, MakeLockHasAnErrorCodeForm) {
  auto b = r.open("alpha://h");
  std::error_code ec;
  EXPECT_FALSE(b->make_lock("", ec));
  EXPECT_EQ(ec, errc::invalid_name);
  EXPECT_NE(last_error_message().find("empty"), std::string::npos) << last_error_message();
  EXPECT_TRUE(b->make_lock("ok", ec));
  EXPECT_FALSE(ec);
  lock_options huge;
  huge.ttl = std::chrono::hours(5'000'000);
  EXPECT_FALSE(b->make_lock("huge", huge, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_NE(last_error_message().find("87600h"), std::string::npos) << last_error_message();
}

// The option rules make_lock applies, checkable before any backend is opened (the CLI does).
TEST(LockOptions, CheckedByTheSameRulesAsMakeLock) {
  std::error_code ec;
  check_lock_options(lock_options{}, ec);
  EXPECT_FALSE(ec) << last_error_message();
  lock_options bad;
  bad.ttl = std::chrono::hours(87601);
  check_lock_options(bad, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_NE(last_error_message().find("87600h"), std::string::npos) << last_error_message();
  bad = {};
  bad.renew_every = bad.ttl;
  check_lock_options(bad, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_NE(last_error_message().find("renew"), std::string::npos) << last_error_message();
  bad = {};
  bad.poll = {std::chrono::milliseconds(5), std::chrono::milliseconds(1)};
  check_lock_options(bad, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
}

// dlock::open has the error_code form the README promises (the default registry, memory:// built in).
TEST(DefaultRegistry, OpenHasAnErrorCodeForm) {
  std::error_code ec;
  EXPECT_FALSE(dlock::open("nosuchscheme://h", ec));
  EXPECT_EQ(ec, errc::unknown_scheme);
  EXPECT_NE(last_error_message().find("nosuchscheme"), std::string::npos) << last_error_message();
  EXPECT_TRUE(dlock::open("memory://", ec)) << last_error_message();
  EXPECT_FALSE(ec);
  EXPECT_TRUE(dlock::open("memory://", {capability::fencing}, ec)) << last_error_message();
}

TEST_F(registry_fixture, UnknownSchemeListsBuiltInSchemesWithExamples) {
  const auto [ec, msg] = fail("gamma://h");
  EXPECT_EQ(ec, errc::unknown_scheme);
  for (const char* s : {"gamma", "alpha", "alpha://127.0.0.1:1", "beta", "beta:///tmp/x"})
    EXPECT_NE(msg.find(s), std::string::npos) << s << " missing in: " << msg;
}

TEST_F(registry_fixture, UnknownParameterIsNamedWithTheAcceptedOnes) {
  const auto [ec, msg] = fail("alpha://h/?bogus=1");
  EXPECT_EQ(ec, errc::invalid_uri);
  for (const char* s : {"bogus", "ttl", "watchdog", "renew", "poll", "db"})
    EXPECT_NE(msg.find(s), std::string::npos) << msg;
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
  const std::vector<std::string> texts = {"redis://user:S3cr3t-P%40ss@host:1/?bogus=1",
                                          "alpha://user:S3cr3t-P%40ss@host:1/?bogus=1",
                                          "alpha://user:S3cr3t@host:1/?ttl=soon",
                                          "alpha://user:S3cr3t@host:99999/",
                                          "redis://u:S3cr3t@@@:::/",
                                          "alpha://u:S3cr3t@h/#frag",
                                          "alpha://u:S3cr3t@h/?a=1&a=2",
                                          "alpha://u:S3cr3t@a:1,,b/x",
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
