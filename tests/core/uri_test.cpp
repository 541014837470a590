#include <gtest/gtest.h>

#include "dlock/dlock.hpp"

namespace {

using dlock::uri;
using namespace std::chrono_literals;

dlock::errc code_of(std::string_view text) {
  try {
    (void)uri::parse(text);
  } catch (const dlock::error& e) {
    return static_cast<dlock::errc>(e.code().value());
  }
  return dlock::errc{};
}

TEST(Uri, SchemeHostPortPathQuery) {
  const auto u = uri::parse("Redis://127.0.0.1:6379/2?ttl=30s&watchdog=false");
  EXPECT_EQ(u.scheme(), "redis");
  ASSERT_EQ(u.hosts().size(), 1u);
  EXPECT_EQ(u.hosts()[0].host, "127.0.0.1");
  EXPECT_EQ(u.hosts()[0].port, 6379);
  EXPECT_EQ(u.path(), "/2");
  EXPECT_EQ(u.get("ttl"), "30s");
  EXPECT_EQ(u.get_duration("ttl"), 30s);
  EXPECT_EQ(u.get_bool("watchdog"), false);
  EXPECT_FALSE(u.has("nope"));
}

TEST(Uri, SchemeWithPlus) { EXPECT_EQ(uri::parse("mysql+forupdate://h/db").scheme(), "mysql+forupdate"); }

TEST(Uri, UserinfoAndPercentEscapes) {
  const auto u = uri::parse("redis://us%40er:S3cr3t-P%40ss@host:1/a%20b");
  EXPECT_EQ(u.user(), "us@er");
  EXPECT_EQ(u.password(), "S3cr3t-P@ss");
  EXPECT_EQ(u.path(), "/a b");
  EXPECT_EQ(u.redacted().find("S3cr3t"), std::string::npos);
  EXPECT_NE(u.redacted().find("***"), std::string::npos);
}

TEST(Uri, Ipv6) {
  const auto u = uri::parse("redis://[::1]:6380");
  ASSERT_EQ(u.hosts().size(), 1u);
  EXPECT_EQ(u.hosts()[0].host, "::1");
  EXPECT_EQ(u.hosts()[0].to_string(), "[::1]:6380");
}

TEST(Uri, MultiHostList) {
  const auto u = uri::parse("zookeeper://a:1,b:2,[::1]:3/path");
  ASSERT_EQ(u.hosts().size(), 3u);
  EXPECT_EQ(u.hosts()[0].host, "a");
  EXPECT_EQ(u.hosts()[1].port, 2);
  EXPECT_EQ(u.hosts()[2].host, "::1");
  EXPECT_EQ(u.path(), "/path");
  EXPECT_EQ(code_of("zookeeper://a:1,,b:2/x"), dlock::errc::invalid_uri);
}

TEST(Uri, NoHost) {
  const auto u = uri::parse("file:///var/lock/x");
  EXPECT_TRUE(u.hosts().empty());
  EXPECT_EQ(u.path(), "/var/lock/x");
}

TEST(Uri, Rejections) {
  EXPECT_EQ(code_of(""), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("no-scheme"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h:0"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h:65536"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h:port"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h/?a=1&a=2"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h/#frag"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://h/?=1"), dlock::errc::invalid_uri);
  // A NUL byte: the query decoder would cut the value there ("dl"), so it is refused everywhere.
  EXPECT_EQ(code_of("postgres+index://h/db?table=dl%00ck"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("redis://user:pass%00word@h"), dlock::errc::invalid_uri);
  EXPECT_EQ(code_of("file:///var/lock/a%00b"), dlock::errc::invalid_uri);
}

TEST(Uri, BadTypedValuesNameTheKey) {
  const auto u = uri::parse("redis://h/?ttl=soon&n=99&b=maybe");
  try {
    (void)u.get_duration("ttl");
    FAIL();
  } catch (const dlock::error& e) {
    EXPECT_NE(std::string(e.what()).find("ttl"), std::string::npos);
  }
  EXPECT_THROW((void)u.get_int("n", 0, 10), dlock::error);
  EXPECT_THROW((void)u.get_bool("b"), dlock::error);
}

TEST(Duration, Parses) {
  EXPECT_EQ(dlock::parse_duration("500ms"), 500ms);
  EXPECT_EQ(dlock::parse_duration("30s"), 30s);
  EXPECT_EQ(dlock::parse_duration("2m"), 2min);
  EXPECT_EQ(dlock::parse_duration("1h"), 1h);
  EXPECT_EQ(dlock::parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(dlock::format_duration(1500ms), "1500ms");
  EXPECT_EQ(dlock::format_duration(120s), "2m");
}

TEST(Duration, Rejects) {
  for (const char* bad : {"", "5", "ms", "-1s", "1.5.2s", ".5s", "10 s", "3d", "0.0001ms", "1e3s"})
    EXPECT_THROW(dlock::parse_duration(bad), dlock::error) << bad;
}

}  // namespace

// A credential can also travel in the query (ZooKeeper's ?digest=user:password): its value is
// hidden like the userinfo password, in redacted(), typed-value errors and unparsable text.
TEST(Uri, CredentialQueryValuesAreRedacted) {
  const auto u = uri::parse("zookeeper://h:2181/dlock?digest=alice:S3cr3t&session_timeout=5s");
  EXPECT_EQ(u.get("digest"), "alice:S3cr3t");
  EXPECT_EQ(u.redacted().find("S3cr3t"), std::string::npos) << u.redacted();
  EXPECT_NE(u.redacted().find("digest=***"), std::string::npos) << u.redacted();
  EXPECT_NE(u.redacted().find("session_timeout=5s"), std::string::npos) << u.redacted();
  try {
    (void)uri::parse("zookeeper://h:2181/dlock?digest=alice:S3cr3t&ttl=soon").get_duration("ttl");
    FAIL() << "a bad duration must throw";
  } catch (const dlock::error& e) {
    EXPECT_EQ(std::string(e.what()).find("S3cr3t"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dlock::redact_uri_text("zookeeper://h:2181:bad/x?digest=alice:S3cr3t#").find("S3cr3t"), std::string::npos);
}

// "redis://${HOST}:6379" with HOST unset is "redis://:6379": taking it as localhost would give
// every machine its own lock. An empty host before a port is refused, in a host list too.
TEST(Uri, AnEmptyHostBeforeAPortIsRefused) {
  for (const char* text : {"redis://:6379", "mysql+getlock://u:p@:3306/db", "memcached://:11211",
                           "redis://127.0.0.1:6379,:6380", "redlock://:1,:2,:3"}) {
    try {
      (void)uri::parse(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << text;
      EXPECT_NE(std::string(e.what()).find("host before ':"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(":p@"), std::string::npos) << "password shown: " << e.what();
    }
  }
}

// Text that lost its "//" still has its password hidden in every message.
TEST(Uri, APasswordInAUriWithoutItsSlashesIsNeverShown) {
  for (const char* text :
       {"redis:/admin:S3cretPw@h", "redis//u:S3cretPw@h", "redis:u:S3cretPw@h:6379", "redis:///:S3cretPw@h"}) {
    EXPECT_EQ(dlock::redact_uri_text(text).find("S3cretPw"), std::string::npos) << dlock::redact_uri_text(text);
    try {
      (void)uri::parse(text);
    } catch (const dlock::error& e) {
      EXPECT_EQ(std::string(e.what()).find("S3cretPw"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(dlock::redact_uri_text("redis:/admin:S3cretPw@h"), "redis:/***@h");
}

// ttl=5000000h gave a lease valid for 0 ms (the steady clock overflowed): a duration that does
// not fit is refused with the limit in the message.
TEST(Uri, DurationsLongerThanTheLimitAreRefusedNamingIt) {
  EXPECT_EQ(dlock::parse_duration("87600h"), std::chrono::hours(87600));
  for (const char* text : {"87601h", "5000000h", "99999999h", "999999999999s"}) {
    try {
      (void)dlock::parse_duration(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const dlock::error& e) {
      EXPECT_NE(std::string(e.what()).find("87600h"), std::string::npos) << e.what();
    }
  }
  try {
    (void)uri::parse("redis://h:1?ttl=5000000h").get_duration("ttl");
    FAIL() << "accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::invalid_uri);
    EXPECT_NE(std::string(e.what()).find("ttl"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("87600h"), std::string::npos) << e.what();
  }
}
