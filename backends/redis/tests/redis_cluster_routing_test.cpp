// The cluster routing unit (src/cluster.hpp) on its own: the key's hash slot against the cluster
// specification's examples and against what a real cluster node computes (CLUSTER KEYSLOT) for
// many random binary keys, and the parsing of MOVED and ASK replies. The slot test FAILS when
// DLOCK_REDIS_CLUSTER_URI is unset (compose/native/dlock-servers up redis-cluster).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <random>
#include <string>

#include "cluster.hpp"
#include "dlock/uri.hpp"
#include "dlock_test/support.hpp"

namespace {

using dlock::redis::key_slot;

TEST(RedisClusterRouting, SlotsOfTheSpecificationsExamples) {
  EXPECT_EQ(key_slot("123456789"), 0x31C3 & 16383);  // CRC16/XMODEM's check value
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot(std::string("foo{}{bar}")));  // an empty tag: the whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));            // the first '{' to the next '}'
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));             // only the first tag counts
  EXPECT_EQ(key_slot("foo{bar"), key_slot(std::string("foo{bar")));  // no '}': the whole key
  // Redisson's layout: the lock key and its channel share a slot.
  EXPECT_EQ(key_slot("orders"), key_slot("redisson_lock__channel:{orders}"));
}

TEST(RedisClusterRouting, SlotsAgreeWithARealClusterNode) {
  const auto u = dlock::uri::parse(dlock::testing::server_uri("DLOCK_REDIS_CLUSTER_URI"));
  const auto& h = u.hosts().at(0);
  std::unique_ptr<redisContext, decltype(&redisFree)> c(redisConnect(h.host.c_str(), h.port_or(6379)), redisFree);
  ASSERT_TRUE(c && !c->err);
  std::mt19937 random(20261126);
  std::uniform_int_distribution<int> length(0, 24), byte(0, 255), brace(0, 9);
  for (int i = 0; i < 2000; ++i) {
    std::string key;
    for (int n = length(random); n > 0; --n)
      key.push_back(brace(random) == 0 ? "{}"[byte(random) % 2] : static_cast<char>(byte(random)));
    auto* r = static_cast<redisReply*>(redisCommand(c.get(), "CLUSTER KEYSLOT %b", key.data(), key.size()));
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
    EXPECT_EQ(key_slot(key), r->integer) << "key of " << key.size() << " bytes";
    freeReplyObject(r);
  }
}

redisReply error_reply(std::string& text) {
  redisReply r{};
  r.type = REDIS_REPLY_ERROR;
  r.str = text.data();
  r.len = text.size();
  return r;
}

TEST(RedisClusterRouting, RedirectionsAreParsed) {
  std::string moved = "MOVED 3999 127.0.0.1:6381", ask = "ASK 12182 ::1:7000", other = "ERR unknown",
              bad_slot = "MOVED 16384 127.0.0.1:6381", no_port = "MOVED 1 127.0.0.1";
  auto r = error_reply(moved);
  auto to = dlock::redis::redirection_of(&r);
  ASSERT_TRUE(to);
  EXPECT_FALSE(to->ask);
  EXPECT_EQ(to->slot, 3999);
  EXPECT_EQ(to->host, "127.0.0.1");
  EXPECT_EQ(to->port, 6381);
  r = error_reply(ask);
  to = dlock::redis::redirection_of(&r);
  ASSERT_TRUE(to);
  EXPECT_TRUE(to->ask);
  EXPECT_EQ(to->slot, 12182);
  EXPECT_EQ(to->host, "::1");
  EXPECT_EQ(to->port, 7000);
  for (auto* text : {&other, &bad_slot, &no_port}) {
    r = error_reply(*text);
    EXPECT_FALSE(dlock::redis::redirection_of(&r)) << *text;
  }
  EXPECT_FALSE(dlock::redis::redirection_of(nullptr));
}

}  // namespace
