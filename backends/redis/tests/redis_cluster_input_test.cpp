// Redis Cluster, bad input: a redis+cluster:// URI of a server not in cluster mode, a redis:// URI
// of a cluster node, a prefix and an empty hash tag (a lock whose keys would span two slots), a
// wrong password. On the launcher's redis-cluster, through redis_cluster_support.hpp.
#include <gtest/gtest.h>

#include <string>
#include <system_error>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "redis_cluster_support.hpp"

namespace {

using namespace dlock::testing::redis_cluster;

std::error_code open_error(const std::string& uri, std::string& what) {
  try {
    (void)dlock::open(uri);
  } catch (const dlock::error& e) {
    what = e.what();
    return e.code();
  }
  return {};
}

TEST_F(RedisCluster, BadInputIsRefusedClearly) {
  std::string what;
  const auto single = dlock::testing::with_scheme(dlock::testing::server_uri("DLOCK_REDIS_URI"), "redis+cluster");
  EXPECT_EQ(open_error(single, what), make_error_code(dlock::errc::backend_error)) << what;
  EXPECT_NE(what.find("not in cluster mode"), std::string::npos) << what;

  const auto node = "redis://127.0.0.1:" + std::to_string(cluster_ports()[0]);
  EXPECT_EQ(open_error(node, what), make_error_code(dlock::errc::backend_error)) << what;
  EXPECT_NE(what.find("redis+cluster://"), std::string::npos) << what;

  // prefix=p: makes the key p:<name> and tags every derived key with it (redisson_lock_token:{p:<name>}):
  // one slot, that of p:<name>, whatever the name's own slot.
  {
    std::string name;
    do name = unique("prefixed");
    while (keyslot("p:" + name) == keyslot(name));
    auto held = open_cluster("?prefix=p:")->make_lock(name)->try_acquire();
    ASSERT_TRUE(held) << "a prefixed name was not granted";
    const auto owner = owner_of(keyslot("p:" + name));
    ASSERT_TRUE(owner);
    EXPECT_EQ(masters_storing("p:" + name), std::vector<int>{owner->master});
    EXPECT_EQ(masters_storing(prefixed("redisson_lock_token", "p:" + name)), std::vector<int>{owner->master});
  }
  // An empty hash tag is no tag: "{}x" hashes whole, but its fencing key redisson_lock_token:{}x too,
  // which is another slot.
  {
    std::string name;
    do name = "{}" + unique("empty-tag");
    while (keyslot(prefixed("redisson_lock_token", name)) == keyslot(name));
    try {
      (void)open_cluster()->make_lock(name);
      ADD_FAILURE() << "a lock whose keys span two slots was made: " << name;
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::invalid_name)) << e.what();
      EXPECT_NE(std::string(e.what()).find("slot"), std::string::npos) << e.what();
    }
  }

  // Wrong password. The cluster's default user has no password (no requirepass), so the refusal
  // is shown with the launcher's ACL user dlock (password dlock-secret), whom every node knows:
  // first that the right password works, then that a wrong one is refused.
  const auto hosts = cluster_uri().substr(cluster_uri().find("://") + 3);
  {
    auto r = ask(cluster_ports()[0], {"AUTH", "dlock", "wrong"});
    ASSERT_TRUE(is_error(r) && text_of(r).starts_with("WRONGPASS")) << text_of(r);
  }
  EXPECT_TRUE(
      dlock::open("redis+cluster://dlock:dlock-secret@" + hosts + "?ttl=5s")->make_lock(unique("acl"))->try_acquire());
  EXPECT_EQ(open_error("redis+cluster://dlock:pw-SECRET-1@" + hosts, what),
            make_error_code(dlock::errc::authentication_failed))
      << what;
  EXPECT_EQ(what.find("SECRET"), std::string::npos) << what;
}

}  // namespace
