// zookeeper:// on a real server (DLOCK_ZOOKEEPER_URI) beside other recipes in the same lock folder,
// with real kazoo as the peer (tests/kazoo_peer.py): kazoo waits behind our node with Curator's
// pattern, and every node another recipe treats as a contender (kazoo's Lock, WriteLock and
// ReadLock, Curator's read-write lock) excludes us, in sequence order.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

}  // namespace

TEST(zookeeper, KazooWaitsBehindOurNodeWithCuratorsPattern) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("kazoo");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  const auto u = dlock::uri::parse(uri);
  const auto hosts = u.hosts()[0].to_string();
  const auto path = zk::parent_path(root_of(uri), name);
  const std::string script = "import sys\nfrom kazoo.client import KazooClient\n"
                             "c=KazooClient(hosts=sys.argv[1]); c.start(timeout=10)\n"
                             "l=c.Lock(sys.argv[2], extra_lock_patterns=['-lock-'])\n"
                             "from kazoo.exceptions import LockTimeout\n"
                             "try:\n  got=l.acquire(timeout=1.5)\nexcept LockTimeout:\n  got=False\n"
                             "print('acquired' if got else 'waited')\n"
                             "if got: l.release()\nc.stop()\n";
  const std::string cmd =
      "/usr/bin/python3 -c \"" + std::regex_replace(script, std::regex("\""), "\\\"") + "\" " + hosts + " " + path;
  auto run = [&] {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[256];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
  };
  EXPECT_NE(run().find("waited"), std::string::npos) << "kazoo did not wait behind our node";
  held.release();
  EXPECT_NE(run().find("acquired"), std::string::npos) << "kazoo could not acquire after our release";
}
TEST(zookeeper_sequence, EveryKnownRecipesNodesAreContendersInSequenceOrder) {
  EXPECT_EQ(zk::sequence_of("0123456789abcdef0123456789abcdef__lock__0000000007"), 7);          // kazoo Lock, WriteLock
  EXPECT_EQ(zk::sequence_of("0123456789abcdef0123456789abcdef__rlock__0000000008"), 8);         // kazoo ReadLock
  EXPECT_EQ(zk::sequence_of("_c_0b4a7c48-1f1d-4b1e-9d1e-0123456789ab-__WRIT__0000000009"), 9);  // Curator RW lock
  EXPECT_EQ(zk::sequence_of("_c_0b4a7c48-1f1d-4b1e-9d1e-0123456789ab-__READ__0000000010"), 10);
  EXPECT_FALSE(zk::sequence_of("42")) << "a nested folder (name orders/42 under orders) is no contender";
  EXPECT_FALSE(zk::sequence_of("x__lock__"));
  const std::vector<std::string> mixed{"k__rlock__0000000004", "_c_u-lock-0000000002", "k__lock__0000000003",
                                       "_c_v-__WRIT__0000000001", "folder"};
  EXPECT_EQ(zk::lock_nodes_in_order(mixed), (std::vector<std::string>{"_c_v-__WRIT__0000000001", "_c_u-lock-0000000002",
                                                                      "k__lock__0000000003", "k__rlock__0000000004"}));
}

TEST(zookeeper_interop, KazooLockWriteLockAndReadLockHoldersExcludeUs) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  for (const std::string kind : {"lock", "write", "read"}) {
    SCOPED_TRACE("kazoo " + kind);
    const auto name = unique_name("kazoo-holds");
    kazoo_peer peer(uri, zk::parent_path(root_of(uri), name), kind);
    ASSERT_TRUE(peer.wait_for("acquired", 30s));
    auto lock = b->make_lock(name);
    EXPECT_FALSE(lock->try_acquire()) << "kazoo holds the lock, yet we got it too";
    peer.release();
    EXPECT_TRUE(lock->try_acquire_for(20s)) << "kazoo released, yet we could not acquire";
  }
}

TEST(zookeeper_interop, CuratorReadWriteLockNodesExcludeUs) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  auto zh = raw_connect(uri);
  for (const std::string marker : {"__READ__", "__WRIT__"}) {
    SCOPED_TRACE(marker);
    const auto name = unique_name("curator-rw");
    const auto parent = zk::parent_path(root_of(uri), name);
    // Our lease makes the parent folder and keeps it until the Curator node is in it: an empty
    // folder is a container the server removes within a second.
    auto keeper = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(keeper);
    // What Curator's InterProcessReadWriteLock creates: protected ephemeral sequential nodes.
    char created[512];
    ASSERT_EQ(zoo_create(zh.get(), (parent + "/_c_0b4c2d1e-1111-2222-3333-444455556666-" + marker).c_str(), nullptr, -1,
                         &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created),
              ZOK);
    keeper.release();
    EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "a Curator " << marker << " node holds the lock, yet we got it";
    ASSERT_EQ(zoo_delete(zh.get(), created, -1), ZOK);
    EXPECT_TRUE(b->make_lock(name)->try_acquire());
  }
}

// dlock holds, kazoo queues (with Curator's pattern, without which kazoo ignores our nodes), then a
// second dlock client queues behind kazoo. Each grant must wait for the previous holder's release.
TEST(zookeeper_interop, QueueOfDlockKazooDlockNeverHasTwoHolders) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto first_backend = dlock::open(uri), second_backend = dlock::open(uri);
  const auto name = unique_name("kazoo-queue");
  const auto parent = zk::parent_path(root_of(uri), name);
  auto zh = raw_connect(uri);
  auto first = first_backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(first);
  kazoo_peer peer(uri, parent, "lock", {"-lock-"});
  wait_for_children(zh.get(), parent, 2);
  auto second_lock = second_backend->make_lock(name);
  auto second = std::async(std::launch::async, [&] {
    auto l = second_lock->try_acquire_for(60s);
    return std::pair{std::move(l), steady_seconds()};
  });
  wait_for_children(zh.get(), parent, 3);
  const auto first_released = steady_seconds();
  first.release();
  const auto kazoo_acquired = peer.wait_for("acquired", 30s);
  ASSERT_TRUE(kazoo_acquired);
  EXPECT_GT(*kazoo_acquired, first_released);
  std::this_thread::sleep_for(1s);  // kazoo holds a while: a grant to the second client now is a double grant
  peer.release();
  const auto kazoo_released = peer.wait_for("released", 30s);
  ASSERT_TRUE(kazoo_released);
  auto [granted, granted_at] = second.get();
  ASSERT_TRUE(granted) << "the second dlock client never got the lock";
  EXPECT_GT(granted_at, *kazoo_released) << "the second dlock client was granted " << (*kazoo_released - granted_at)
                                         << " s before kazoo released: two holders at once";
}
