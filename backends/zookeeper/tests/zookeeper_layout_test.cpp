// zookeeper:// on a real server (DLOCK_ZOOKEEPER_URI), the mutex's nodes and queue: sequence
// order across the counter's wrap, node names as Curator's, waiters in arrival order, the waiter
// granted without reading the queue again (and when it must not be), reentrancy per lock object,
// the czxid as fencing token, empty parents removed by the server, orphans of a lost create removed.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <limits>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp
using dlock::testing::eventually;

}  // namespace

TEST(zookeeper_sequence, OrderSurvivesTheCounterWrapping) {
  EXPECT_EQ(zk::sequence_of("_c_0b4a7c48-1f1d-4b1e-9d1e-0123456789ab-lock-0000000042"), 42);
  EXPECT_EQ(zk::sequence_of("x-lock--2147483648"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(zk::sequence_of("x-lock-2147483647"), 2147483647);
  EXPECT_FALSE(zk::sequence_of("unrelated"));
  EXPECT_FALSE(zk::sequence_of("x-lock-12ab"));
  const std::vector<std::string> wrapped{"c-lock--2147483647", "a-lock-2147483646", "d-lock--2147483646",
                                         "b-lock-2147483647", "e-lock-0000000000"};
  // e (0) is far from the others: fine, still within half the ring.
  const std::vector<std::string> expected{"a-lock-2147483646", "b-lock-2147483647", "c-lock--2147483647",
                                          "d-lock--2147483646"};
  auto got = zk::lock_nodes_in_order({wrapped[0], wrapped[1], wrapped[2], wrapped[3]});
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(zk::sequence_before(2147483647, std::numeric_limits<std::int32_t>::min()));
  EXPECT_TRUE(zk::sequence_before(1, 2));
  EXPECT_FALSE(zk::sequence_before(2, 1));
}

TEST(zookeeper, NodesAreNamedAsCuratorNamesThem) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("curator");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto zh = raw_connect(uri);
  const auto kids = children(zh.get(), zk::parent_path(root_of(uri), name));
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      kids[0], std::regex("_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10}")))
      << kids[0];
  held.release();
  EXPECT_TRUE(children(zh.get(), zk::parent_path(root_of(uri), name)).empty());
}

TEST(zookeeper, WaitersAreGrantedInArrivalOrder) {
  auto [uri, b, name, parent, zh] = fresh_name_in_view("fifo");
  auto first = b->make_lock(name)->acquire();
  std::mutex m;
  std::vector<int> order;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < 3; ++i) locks.push_back(b->make_lock(name));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto l = locks[i]->acquire();
      std::lock_guard g(m);
      order.push_back(i);
    });
    wait_for_contenders(zh.get(), parent, static_cast<std::size_t>(i) + 2);  // arrival order is fixed now
  }
  first.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

// The server's count of requests received from one session (four-letter word cons:
// " /127.0.0.1:port[1](queued=0,recved=N,sent=N,sid=0x...,...)"); -1 if not listed.
long long requests_received_from(const std::string& text, std::int64_t session_id) {
  const std::string answer = four_letter(text, "cons");
  char sid[32];
  std::snprintf(sid, sizeof sid, "sid=0x%llx,", static_cast<unsigned long long>(session_id));
  std::istringstream lines(answer);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(sid) == std::string::npos) continue;
    const auto at = line.find("recved=");
    if (at != std::string::npos) return std::stoll(line.substr(at + 7));
  }
  return -1;
}

// A waiter whose queue read showed only nodes of its own session ahead of it knows when they are
// all gone (the server answered their deletes, or their deletion events came): when its
// predecessor's deletion comes it is first, and it is granted without reading the queue again.
// A release handed to it costs the server: the holder's delete, the new holder's exists-watch on
// its own node, and (here) its release's delete: 3 requests, not 4 (no get_children).
TEST(zookeeper_queue, WaiterBehindOnlyItsOwnSessionsNodesIsGrantedWithoutReadingTheQueueAgain) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri + "?session_timeout=30s");  // no heartbeat or ping in the counted window
  const auto name = unique_name("no-reread");
  const auto parent = zk::parent_path(root_of(uri), name);
  auto zh = raw_connect(uri);
  auto holder = b->make_lock(name)->acquire();
  const auto id = zk::session_of(*holder.state());
  ASSERT_TRUE(id);
  auto waiter_lock = b->make_lock(name);
  std::promise<void> granted;
  std::promise<void> may_release;
  std::thread waiter([&] {
    auto l = waiter_lock->acquire();
    granted.set_value();
    may_release.get_future().wait();
  });
  wait_for_contenders(zh.get(), parent, 2);
  std::this_thread::sleep_for(200ms);  // the waiter's exists-watch on the holder's node is in
  const auto before = requests_received_from(uri, id->client_id);
  ASSERT_GE(before, 0);
  holder.release();
  granted.get_future().wait();
  may_release.set_value();
  waiter.join();  // its release's delete was answered: every request before it was received
  EXPECT_EQ(requests_received_from(uri, id->client_id) - before, 3);
}

// The care the shortcut above needs: a waiter whose predecessor gives up while a node before that
// one still holds must not take the lock. Holder of another session (its node is not ours: we
// cannot know it is gone), and holder of the same session (ours, but its delete not answered).
void waiter_behind_a_quitter_waits_for_the_holder(bool holder_in_same_session) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  auto other = dlock::open(uri);
  const auto name = unique_name("quitter");
  const auto parent = zk::parent_path(root_of(uri), name);
  auto zh = raw_connect(uri);
  auto holder = (holder_in_same_session ? b : other)->make_lock(name)->acquire();
  auto quitter_lock = b->make_lock(name);
  auto waiter_lock = b->make_lock(name);
  auto quitter =
      std::async(std::launch::async, [&] { return static_cast<bool>(quitter_lock->try_acquire_for(1500ms)); });
  wait_for_contenders(zh.get(), parent, 2);
  std::atomic<bool> waiter_granted{false};
  std::thread waiter([&] {
    auto l = waiter_lock->try_acquire_for(60s);
    waiter_granted = static_cast<bool>(l);
  });
  wait_for_contenders(zh.get(), parent, 3);
  EXPECT_FALSE(quitter.get());  // gave up: its node, the waiter's predecessor, is deleted
  wait_for_contenders(zh.get(), parent, 2);
  std::this_thread::sleep_for(500ms);  // time for a wrong grant to happen
  EXPECT_FALSE(waiter_granted.load()) << "granted while the holder still holds";
  holder.release();
  waiter.join();
  EXPECT_TRUE(waiter_granted.load());
}

TEST(zookeeper_queue, WaiterBehindAQuitterWaitsForAHolderOfAnotherSession) {
  waiter_behind_a_quitter_waits_for_the_holder(false);
}
TEST(zookeeper_queue, WaiterBehindAQuitterWaitsForAHolderOfTheSameSession) {
  waiter_behind_a_quitter_waits_for_the_holder(true);
}

TEST(zookeeper, ReentrantPerLockObjectOnly) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("reent");
  auto mine = b->make_lock(name), other = b->make_lock(name);
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = mine->try_acquire();
  ASSERT_TRUE(inner);
  EXPECT_EQ(outer.fencing_token(), inner.fencing_token());
  EXPECT_FALSE(other->try_acquire()) << "a second lock object in the same process must wait its turn";
  inner.release();
  EXPECT_FALSE(other->try_acquire());
  outer.release();
  EXPECT_TRUE(other->try_acquire());
}

TEST(zookeeper, FencingIsTheCzxidAndIncreases) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("fence");
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto l = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.fencing_token());
    EXPECT_GT(*l.fencing_token(), last);
    last = *l.fencing_token();
  }
}

// Parents are container nodes: once the last lock node under one is gone, the server deletes it
// (the launcher sets znode.container.checkIntervalMs=1000; the server default sweeps every 60 s),
// so a service locking millions of distinct names does not leave millions of empty parents.
TEST(zookeeper, EmptyParentsAreRemovedByTheServer) {
  auto [uri, b, name, parent, zh] = fresh_name_in_view("container");
  {
    auto held = b->make_lock(name)->acquire();
    Stat st{};
    ASSERT_EQ(zoo_exists(zh.get(), parent.c_str(), 0, &st), ZOK);
    EXPECT_EQ(st.numChildren, 1);
  }
  int rc = ZOK;
  for (int i = 0; i < 100 && (rc = zoo_exists(zh.get(), parent.c_str(), 0, nullptr)) == ZOK; ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rc, ZNONODE) << parent << " is still there 10 s after its last lock node went";
  // And the name still works: the next acquire makes the parent again.
  EXPECT_TRUE(b->make_lock(name)->try_acquire());
}

// What a create with a lost reply, or a delete cut off for two session timeouts, leaves behind: a
// node of our live session that nobody will release. The session deletes it in the background,
// found by its protected prefix, so the name is not blocked for as long as the process lives.
TEST(zookeeper, NodesOfALostCreateAreDeletedInTheBackground) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  zk::session_options o;
  const auto parsed = dlock::uri::parse(uri);
  for (const auto& h : parsed.hosts())
    o.hosts += (o.hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port_or(2181));
  o.session_timeout = 6s;
  auto s = zk::session::start(o, "test");
  s->wait_established(std::chrono::steady_clock::now() + 10s, "within 10 s");
  const auto name = unique_name("orphan");
  const auto parent = zk::parent_path(root_of(uri), name);
  // The node a lost create would have made: protected name, ephemeral sequential, our session.
  ASSERT_EQ(zoo_create(s->handle(), parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0), ZOK);
  const auto prefix = zk::node_prefix("0b4c2d1e-1111-2222-3333-444455556666");
  char created[512];
  ASSERT_EQ(zoo_create(s->handle(), (parent + "/" + prefix).c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                       ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created),
            ZOK);
  auto b = dlock::open(uri);
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "the orphan node should block the name until deleted";
  s->delete_in_background(parent, prefix);
  for (int i = 0; i < 200 && s->background_deletes_pending() > 0; ++i) std::this_thread::sleep_for(25ms);
  EXPECT_EQ(s->background_deletes_pending(), 0u);
  auto zh = raw_connect(uri);
  EXPECT_TRUE(zk::lock_nodes_in_order(children(zh.get(), parent)).empty()) << "the orphan is still there";
  EXPECT_TRUE(b->make_lock(name)->try_acquire()) << "the name is still blocked";
}

TEST(zookeeper_inspection, TheLowestNodeHoldsAndTheRestWaitEachNamedByItsData) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("inspect");
  const auto parent = zk::parent_path(root_of(uri), name);
  EXPECT_FALSE(b->inspect(name).held);
  auto zh = raw_connect(uri);
  auto holder_lock = b->make_lock(name);
  auto held = holder_lock->acquire();
  auto waiter_lock = b->make_lock(name);
  std::thread waiter([&] { auto l = waiter_lock->acquire(); });
  wait_for_contenders(zh.get(), parent, 2);

  const auto info = b->inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, holder_lock->owner());
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::mutex);
  ASSERT_TRUE(info.waiters_known);
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_EQ(info.waiters[0].owner, waiter_lock->owner());
  // force_release deletes the holder's node only: the waiter is granted, the holder's session
  // watcher reports the deletion as the lease lost, and its release says not_owner.
  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, holder_lock->owner());
  waiter.join();  // granted (and released at once)
  EXPECT_TRUE(eventually([&] { return held.lost_token().stop_requested(); })) << "the holder was not told";
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_FALSE(b->inspect(name).held);
  EXPECT_TRUE(b->force_release(name).empty()) << "a free name has no holder to remove";
}

// list walks the folders below the root where the prefix can be: nested names ("a/b" is a folder
// inside the folder of "a") are found, names beside the prefix and released names are not, and a
// name hashed into a "#..." folder (ZooKeeper cannot store it as a path) keeps no name to list.
TEST(zookeeper_inspection, ListFindsTheHeldFoldersWithThePrefix) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto base = unique_name("list");
  auto a = b->make_lock(base + "/a")->try_acquire();
  auto ab = b->make_lock(base + "/a/b")->try_acquire();
  auto axe = b->make_lock(base + "/axe")->try_acquire();
  auto other = b->make_lock(base + "/b")->try_acquire();
  auto hashed = b->make_lock(base + "/a\x01hashed")->try_acquire();
  auto rw = b->make_rw_lock(base + "/a-read")->try_acquire_read();
  ASSERT_TRUE(a && ab && axe && other && hashed && rw);
  EXPECT_EQ(b->list(base + "/a"),
            (std::vector<std::string>{base + "/a", base + "/a-read", base + "/a/b", base + "/axe"}));
  EXPECT_EQ(b->list(base + "/a/"), std::vector<std::string>{base + "/a/b"});
  EXPECT_EQ(b->list(base + "/b"), std::vector<std::string>{base + "/b"});
  a.release();
  EXPECT_EQ(b->list(base + "/a"), (std::vector<std::string>{base + "/a-read", base + "/a/b", base + "/axe"}))
      << "a released name (its folder kept while a nested name is held) is still listed";
  const auto everything = b->list();
  EXPECT_NE(std::find(everything.begin(), everything.end(), base + "/b"), everything.end());
}

TEST(zookeeper_inspection, ReadersHoldTogetherUpToTheFirstWriter) {
  auto [uri, b, name, parent, zh] = fresh_name_in_view("inspect-rw");
  auto r1 = b->make_rw_lock(name)->acquire_read();
  auto r2 = b->make_rw_lock(name)->acquire_read();
  auto writer = b->make_rw_lock(name);
  std::thread w([&] { auto l = writer->acquire_write(); });
  wait_for_contenders(zh.get(), parent, 3);
  const auto info = b->inspect(name);
  ASSERT_EQ(info.holders.size(), 2u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::read);
  EXPECT_EQ(info.holders[1].kind, dlock::hold_kind::read);
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_EQ(info.waiters[0].kind, dlock::hold_kind::write);
  EXPECT_EQ(info.waiters[0].owner, writer->owner());
  // Both readers hold: force_release removes both, and the writer is granted.
  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].kind, dlock::hold_kind::read);
  EXPECT_EQ(removed[1].kind, dlock::hold_kind::read);
  w.join();
  std::error_code ec;
  r1.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  r2.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}
