// Redis Cluster, waiters woken by the release message in both pubsub modes (sharded on the slot's
// master, classic on any node). On the launcher's redis-cluster, through redis_cluster_support.hpp.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>

#include "dlock/dlock.hpp"
#include "redis_cluster_support.hpp"

namespace {

using namespace dlock::testing::redis_cluster;

// The subscriptions on `channel` the cluster counts: sharded ones on the slot's master
// (PUBSUB SHARDNUMSUB), classic ones summed over every node (PUBSUB NUMSUB: a classic subscriber is
// connected to any one node, and a PUBLISH reaches every node's).
long long subscriptions(const std::string& mode, const std::string& channel, int master) {
  if (mode == "sharded") {
    auto r = ask(master, {"PUBSUB", "SHARDNUMSUB", channel});
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : 0;
  }
  long long total = 0;
  for (int p : cluster_ports()) {
    auto r = ask(p, {"PUBSUB", "NUMSUB", channel});
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) total += r->element[1]->integer;
  }
  return total;
}

// Waiters are woken by the release message, in both pubsub modes: the lock's ttl and the poll
// interval are 60 s, so within the waiters' 20 s only a message can wake one (the holder's release
// wakes the first, each waiter's release the next). Without the message the waiters would sleep
// until the holder's PTTL bound and not be granted in time.
TEST_F(RedisCluster, WaitersAreWokenByReleaseMessagesInBothPubsubModes) {
  for (const std::string mode : {"sharded", "classic"}) {
    SCOPED_TRACE("pubsub=" + mode);
    const auto name = unique("wake-" + mode);
    const auto owner = owner_of(keyslot(name));
    ASSERT_TRUE(owner);
    const auto uri = cluster_uri() + "?ttl=60s&poll=60s..60s&wait_after_restart=false&pubsub=" + mode;
    guarded_resource resource;
    auto holder = dlock::open(uri);
    auto held = holder->make_lock(name)->try_acquire();
    ASSERT_TRUE(held);
    resource.enter(held);
    constexpr int waiter_count = 3;
    waiters waiting(waiter_count, uri, name, 20s, resource);
    const auto channel = prefixed("redisson_lock__channel", name);
    EXPECT_TRUE(wait_for([&] { return subscriptions(mode, channel, owner->master) >= waiter_count; }, 10s))
        << "the waiters' " << mode << " subscriptions: " << subscriptions(mode, channel, owner->master);
    if (mode == "sharded") {
      EXPECT_EQ(subscriptions("classic", channel, owner->master), 0) << "a sharded waiter subscribed the classic way";
    }
    release_and_expect_every_waiter_served(held, resource, waiting, waiter_count,
                                           "a waiter was not woken by the release message");
  }
}

}  // namespace
