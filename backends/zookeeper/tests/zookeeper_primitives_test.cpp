// zookeeper://'s reader-writer lock and semaphore against a real server (DLOCK_ZOOKEEPER_URI):
// Curator's layouts node by node, the grant rules, session expiry, and kazoo peers.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"
#include "zk_rw_lock.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

std::string data_of(zhandle_t* zh, const std::string& path) {
  char buffer[1024];
  int length = sizeof buffer;
  Stat st{};
  if (zoo_get(zh, path.c_str(), 0, buffer, &length, &st) != ZOK || length < 0) return {};
  return std::string(buffer, static_cast<std::size_t>(length));
}

// Ends the session of `held` from outside: a second handle with its id and password, then closed
// (the classic trick). The holder's own client may win the reconnect race and keep the session (then
// we close it again); once the server answers "expired" to the takeover, the session is gone and the
// holder learns it when its client reconnects, which on a loaded machine may take seconds.
void expire(const std::string& text, const dlock::lease& held) {
  const auto id = zk::session_of(*held.state());
  ASSERT_TRUE(id);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool gone = false;
  while (!held.lost_token().stop_requested() && std::chrono::steady_clock::now() < deadline) {
    if (!gone) {
      zh_ptr takeover(zookeeper_init(hosts_of(text).c_str(), nullptr, 4000, &*id, nullptr, 0));
      int state = 0;
      for (int i = 0; i < 400; ++i) {
        state = zoo_state(takeover.get());
        if (state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE) break;
        std::this_thread::sleep_for(25ms);
      }
      gone = state == ZOO_EXPIRED_SESSION_STATE;
    }  // closed here: a connected takeover's close ends the session
    for (int i = 0; i < 100 && !held.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(held.lost_token().stop_requested()) << "the holder was not told its session ended";
}

// Expires the session of `held` while `wait_for_grant` (returning a lease) waits in another thread
// for what it holds: the waiter must be granted (`not_back` otherwise) and the expired holder's
// release refused as not_owner.
template <class WaitForGrant>
void expect_granted_after_expiry(const std::string& uri, dlock::lease& held, WaitForGrant wait_for_grant,
                                 const char* not_back) {
  auto waiter = std::async(std::launch::async, std::move(wait_for_grant));
  expire(uri, held);
  EXPECT_TRUE(waiter.get()) << not_back;
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

const std::regex uuid_text("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

bool named(const std::string& child, const std::string& node_name) {
  return std::regex_match(
      child, std::regex("_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-" + node_name + "[0-9]{10}"));
}

// Holding intervals (steady_seconds) from every holder, threads and processes: the most held at once.
class overlap_record {
 public:
  void add(double acquired, double released) {
    std::lock_guard guard(mutex_);
    intervals_.emplace_back(acquired, released);
  }
  std::size_t size() const { return intervals_.size(); }
  // Each interval lies inside its real hold (taken after the grant, ended before the release): an
  // overlap of the recorded ones is a real overlap.
  int most_at_once() const {
    std::vector<std::pair<double, int>> events;
    for (const auto& [a, r] : intervals_) {
      events.emplace_back(a, +1);
      events.emplace_back(r, -1);
    }
    std::sort(events.begin(), events.end());  // at a tie the release (-1) first
    int now = 0, most = 0;
    for (const auto& e : events) most = std::max(most, now += e.second);
    return most;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<double, double>> intervals_;
};

// Where the holders of a test wait for each other until `n` hold at once, so that reaching n does
// not depend on short holds overlapping, however slowly the machine runs (ThreadSanitizer's
// slowdown). A holder waits until n held at once, until every other holder has finished, or, once,
// at most `bound` (then no holder waits any more: a semaphore that never grants n fails the test
// rather than its timeout).
class meeting {
 public:
  meeting(int n, int holders, std::chrono::seconds bound) : n_(n), holders_(holders), bound_(bound) {}
  // Called while holding a permit.
  void hold() {
    std::unique_lock lock(mutex_);
    if (++holding_ >= n_) reached_ = true;
    changed_.notify_all();
    if (!changed_.wait_for(lock, bound_, [&] { return reached_ || gave_up_ || finished_ == holders_ - 1; }))
      gave_up_ = true;
    --holding_;
  }
  void finished() {
    std::lock_guard lock(mutex_);
    ++finished_;
    changed_.notify_all();
  }

 private:
  const int n_, holders_;
  const std::chrono::seconds bound_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int holding_ = 0, finished_ = 0;
  bool reached_ = false, gave_up_ = false;
};

// `rounds` times: a permit of `sem` taken within `wait` (else one more of `failures`), held for
// `hold` (and, with a meeting, until the meeting lets it go) and recorded.
void hold_permits(dlock::semaphore& sem, int rounds, std::chrono::seconds wait, std::chrono::milliseconds hold,
                  overlap_record& record, std::atomic<int>& failures, meeting* meet = nullptr) {
  for (int round = 0; round < rounds; ++round) {
    auto p = sem.try_acquire_for(wait);
    if (!p) {
      ++failures;
      continue;
    }
    const double acquired = steady_seconds();
    std::this_thread::sleep_for(hold);
    if (meet) meet->hold();
    record.add(acquired, steady_seconds());
  }
  if (meet) meet->finished();
}

}  // namespace

// ---- layout ----

TEST(zookeeper_rw, NodesAreNamedAsCuratorsReadWriteLockNamesThem) {
  // `parent`: the folder a mutex of this name uses.
  auto [uri, b, name, parent, zh] = fresh_name_in_view("rw-layout");
  auto rw = b->make_rw_lock(name);
  {
    auto reading = rw->try_acquire_read();
    ASSERT_TRUE(reading);
    const auto kids = children(zh.get(), parent);
    ASSERT_EQ(kids.size(), 1u);
    EXPECT_TRUE(named(kids[0], "__READ__")) << kids[0];
    EXPECT_EQ(data_of(zh.get(), parent + "/" + kids[0]), rw->owner());
    EXPECT_FALSE(rw->try_acquire_write()) << "a writer got in beside a reader";
    EXPECT_EQ(children(zh.get(), parent).size(), 1u) << "a writer that gave up left its node";
  }
  EXPECT_TRUE(children(zh.get(), parent).empty());
  auto writing = rw->try_acquire_write();
  ASSERT_TRUE(writing);
  const auto kids = children(zh.get(), parent);
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_TRUE(named(kids[0], "__WRIT__")) << kids[0];
  // The fencing token is the node's czxid.
  const auto czxid = czxid_of(zh.get(), parent + "/" + kids[0]);
  ASSERT_TRUE(czxid);
  EXPECT_EQ(writing.fencing_token(), czxid);
  writing.release();
  EXPECT_TRUE(children(zh.get(), parent).empty());
}

// An election's candidates are Curator LeaderLatch nodes: "_c_<uuid>-latch-<seq>" in the name's
// folder, the candidate id as data, the leader's term its czxid, the leader the lowest node; and a
// latch node keeps the mutex of the name out (it is a contender like the mutex's own nodes).
TEST(zookeeper_election, CandidatesAreLeaderLatchNodesThatExcludeTheMutex) {
  auto [uri, b, name, parent, zh] = fresh_name_in_view("latch-layout");
  auto vote = b->make_election(name);
  auto leading = vote->try_campaign();
  ASSERT_TRUE(leading);
  const auto kids = children(zh.get(), parent);
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_TRUE(named(kids[0], "latch-")) << kids[0];
  EXPECT_EQ(data_of(zh.get(), parent + "/" + kids[0]), vote->id());
  const auto czxid = czxid_of(zh.get(), parent + "/" + kids[0]);
  ASSERT_TRUE(czxid);
  EXPECT_EQ(leading.term(), *czxid);
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "the mutex of the name was taken beside a leader";
  EXPECT_EQ(children(zh.get(), parent).size(), 1u) << "the refused mutex left its node";
  const auto seen = vote->leader();
  EXPECT_EQ(seen.id, vote->id());
  EXPECT_EQ(seen.term, std::optional<std::uint64_t>(leading.term()));
  leading.resign();
  EXPECT_TRUE(children(zh.get(), parent).empty());
}

TEST(zookeeper_semaphore, LayoutIsCuratorsSemaphoreV2WithLocksAndLeases) {
  auto [uri, b, name, path, zh] = fresh_name_in_view("sem-layout");
  auto sem = b->make_semaphore(name, 3);
  auto two = sem->try_acquire_for(10s, 2);  // a waiting form: through the internal mutex
  ASSERT_TRUE(two);
  auto folders = children(zh.get(), path);
  std::sort(folders.begin(), folders.end());
  EXPECT_EQ(folders, (std::vector<std::string>{"leases", "locks"}));
  const auto leases = children(zh.get(), path + "/leases");
  ASSERT_EQ(leases.size(), 2u);
  std::uint64_t newest = 0;
  for (const auto& lease : leases) {
    EXPECT_TRUE(named(lease, "lease-")) << lease;
    EXPECT_EQ(data_of(zh.get(), path + "/leases/" + lease), sem->owner());
    const auto czxid = czxid_of(zh.get(), path + "/leases/" + lease);
    ASSERT_TRUE(czxid);
    newest = std::max(newest, *czxid);
  }
  EXPECT_EQ(two.fencing_token(), newest);
  EXPECT_TRUE(children(zh.get(), path + "/locks").empty()) << "the internal mutex is held only while acquiring";
  // try_acquire skips the mutex: refused without leaving nodes, granted while permits are free.
  EXPECT_FALSE(sem->try_acquire(2)) << "2 + 2 permits of 3";
  EXPECT_EQ(children(zh.get(), path + "/leases").size(), 2u) << "an acquire that gave up left its lease nodes";
  auto one = sem->try_acquire(1);
  EXPECT_TRUE(one);
  EXPECT_EQ(children(zh.get(), path + "/leases").size(), 3u);
  two.release();
  one.release();
  EXPECT_TRUE(children(zh.get(), path + "/leases").empty());
}

TEST(zookeeper_rw, ContendersOfEveryRecipeBlockAReaderOnlyWhenExclusive) {
  const std::vector<std::string> ordered{
      "_c_a-__READ__0000000001", "0123__rlock__0000000002", "_c_b-__WRIT__0000000003", "_c_c-__READ__0000000004",
      "0123__lock__0000000005",  "_c_d-lock-0000000006",    "_c_e-__READ__0000000007"};
  using dlock::access;
  EXPECT_EQ(zk::blocking_node(access::read, ordered, ordered[0]), "");
  EXPECT_EQ(zk::blocking_node(access::read, ordered, ordered[1]), "");
  EXPECT_EQ(zk::blocking_node(access::write, ordered, ordered[2]), ordered[1]);
  EXPECT_EQ(zk::blocking_node(access::read, ordered, ordered[3]), ordered[2]);
  EXPECT_EQ(zk::blocking_node(access::read, ordered, ordered[6]), ordered[5]);  // our mutex's node is exclusive
  EXPECT_EQ(zk::blocking_node(access::write, ordered, ordered[0]), "");
  EXPECT_TRUE(zk::is_read_node(ordered[1]));
  EXPECT_FALSE(zk::is_read_node(ordered[4]));
}

// ---- grant rules ----

TEST(zookeeper_rw, ReadersHoldTogetherAWriterAndTheMutexAreExcluded) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b1 = dlock::open(uri);
  auto b2 = dlock::open(uri);
  const auto name = unique_name("rw-together");
  auto r1 = b1->make_rw_lock(name)->try_acquire_read();
  auto r2 = b2->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2) << "a second reader (another session) was kept out";
  EXPECT_FALSE(b2->make_rw_lock(name)->try_acquire_write());
  EXPECT_FALSE(b2->make_lock(name)->try_acquire()) << "the mutex of the same name got in beside readers";
  r1.release();
  EXPECT_FALSE(b2->make_rw_lock(name)->try_acquire_write());
  r2.release();
  auto w = b2->make_rw_lock(name)->try_acquire_write();
  ASSERT_TRUE(w);
  EXPECT_FALSE(b1->make_rw_lock(name)->try_acquire_read()) << "a reader got in beside a writer";
  EXPECT_FALSE(b1->make_rw_lock(name)->try_acquire_write());
  w.release();
  EXPECT_TRUE(b1->make_rw_lock(name)->try_acquire_read());
}

TEST(zookeeper_rw, AWaitingWriterHoldsBackALaterReader) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b1 = dlock::open(uri);
  auto b2 = dlock::open(uri);
  auto b3 = dlock::open(uri);
  auto zh = raw_connect(uri);
  const auto name = unique_name("rw-writer-first");
  const auto parent = zk::parent_path(root_of(uri), name);
  auto first_reader = b1->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(first_reader);
  auto writer_lock = b2->make_rw_lock(name);
  std::atomic<double> writer_granted{0}, writer_released{0};
  auto writer = std::async(std::launch::async, [&] {
    auto w = writer_lock->try_acquire_write_for(30s);
    if (!w) return false;
    writer_granted = steady_seconds();
    std::this_thread::sleep_for(300ms);
    writer_released = steady_seconds();
    w.release();
    return true;
  });
  wait_for_children(zh.get(), parent, 2);  // the writer is queued
  auto reader_lock = b3->make_rw_lock(name);
  EXPECT_FALSE(reader_lock->try_acquire_read()) << "a reader arriving after a waiting writer got in before it";
  auto later_reader = std::async(std::launch::async, [&] {
    auto r = reader_lock->try_acquire_read_for(30s);
    return r ? steady_seconds() : 0.0;
  });
  wait_for_children(zh.get(), parent, 3);
  std::this_thread::sleep_for(200ms);
  const double first_released = steady_seconds();
  first_reader.release();
  ASSERT_TRUE(writer.get());
  const double reader_granted = later_reader.get();
  ASSERT_GT(reader_granted, 0.0);
  EXPECT_GT(writer_granted.load(), first_released);
  EXPECT_GT(reader_granted, writer_released.load()) << "the later reader held beside the writer";
}

TEST(zookeeper_rw, FencingTokensIncreaseFromGrantToGrant) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("rw-fencing");
  auto rw = b->make_rw_lock(name);
  auto sem = b->make_semaphore(name + "-sem", 2);
  std::uint64_t last_rw = 0, last_sem = 0;
  for (int i = 0; i < 4; ++i) {
    auto l = i % 2 ? rw->try_acquire_write() : rw->try_acquire_read();
    ASSERT_TRUE(l);
    EXPECT_GT(*l.fencing_token(), last_rw);
    last_rw = *l.fencing_token();
    auto p = sem->try_acquire(1 + i % 2);
    ASSERT_TRUE(p);
    EXPECT_GT(*p.fencing_token(), last_sem);
    last_sem = *p.fencing_token();
  }
}

TEST(zookeeper_rw, ExpiredHolderIsToldAndItsGrantComesBack) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b1 = dlock::open(uri);
  auto b2 = dlock::open(uri);
  for (const auto side : {dlock::access::write, dlock::access::read}) {
    SCOPED_TRACE(std::string(dlock::to_string(side)));
    const auto name = unique_name("rw-expired");
    auto held = b1->make_rw_lock(name)->try_acquire(side);
    ASSERT_TRUE(held);
    expect_granted_after_expiry(
        uri, held, [&] { return b2->make_rw_lock(name)->try_acquire_write_for(30s); },
        "the expired holder's grant did not come back");
  }
}

TEST(zookeeper_semaphore, NeverMoreThanNAndAWaiterGetsAFreedPermit) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  constexpr std::uint32_t n = 3;
  auto zh = raw_connect(uri);
  const auto name = unique_name("sem-n");
  const auto path = zk::parent_path(root_of(uri), name);
  std::vector<std::shared_ptr<dlock::backend>> backends;
  std::vector<dlock::lease> held;
  for (std::uint32_t i = 0; i < n; ++i) {
    backends.push_back(dlock::open(uri));
    held.push_back(backends.back()->make_semaphore(name, n)->try_acquire());
    ASSERT_TRUE(held.back()) << "permit " << i + 1 << " of " << n;
  }
  auto other = dlock::open(uri);
  EXPECT_FALSE(other->make_semaphore(name, n)->try_acquire()) << "permit " << n + 1 << " of " << n;
  auto waiter_sem = other->make_semaphore(name, n);
  auto waiter = std::async(std::launch::async, [&] { return waiter_sem->try_acquire_for(30s); });
  // The waiter holds the internal mutex and has its lease node in: n + 1 leases, one mutex node.
  wait_for_children(zh.get(), path + "/leases", n + 1);
  wait_for_children(zh.get(), path + "/locks", 1);
  const auto mutex_nodes = children(zh.get(), path + "/locks");
  ASSERT_EQ(mutex_nodes.size(), 1u);
  EXPECT_TRUE(named(mutex_nodes[0], "lock-")) << mutex_nodes[0];
  // A try arriving now cannot overtake the waiter: the waiter's lease node is in the count.
  auto behind = dlock::open(uri);
  EXPECT_FALSE(behind->make_semaphore(name, n)->try_acquire());
  EXPECT_EQ(children(zh.get(), path + "/leases").size(), n + 1);
  held.front().release();
  auto granted = waiter.get();
  EXPECT_TRUE(granted) << "a freed permit did not reach the waiter";
  EXPECT_TRUE(children(zh.get(), path + "/locks").empty());
  EXPECT_EQ(children(zh.get(), path + "/leases").size(), n);
}

// try_acquire skips the internal mutex: N tries at once, in N sessions, all get their permit.
TEST(zookeeper_semaphore, SimultaneousTriesAllGetTheNPermits) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  constexpr std::uint32_t n = 4;
  const auto name = unique_name("sem-tries");
  std::vector<std::shared_ptr<dlock::backend>> backends;
  for (std::uint32_t i = 0; i < n; ++i) backends.push_back(dlock::open(uri));
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> ready{0};
    std::vector<std::future<dlock::lease>> tries;
    for (auto& b : backends)
      tries.push_back(std::async(std::launch::async, [&, b] {
        auto sem = b->make_semaphore(name, n);
        ++ready;
        while (ready.load() < static_cast<int>(n)) std::this_thread::yield();
        return sem->try_acquire();
      }));
    int granted = 0;
    for (auto& t : tries) granted += t.get() ? 1 : 0;  // each lease released here
    EXPECT_EQ(granted, static_cast<int>(n)) << "round " << round;
  }
}

TEST(zookeeper_semaphore, ThreadsAndSessionsNeverHoldMoreThanNAtOnce) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  constexpr std::uint32_t n = 2;
  const auto name = unique_name("sem-stress");
  overlap_record record;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  meeting meet(n, 4, 30s);
  auto shared = dlock::open(uri);  // two threads share a session, two have their own
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto b = t < 2 ? shared : dlock::open(uri);
      hold_permits(*b->make_semaphore(name, n), 5, 30s, 20ms, record, failures, &meet);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(record.most_at_once(), static_cast<int>(n));
  EXPECT_EQ(record.most_at_once(), static_cast<int>(n)) << "the semaphore never reached its " << n << " permits";
}

TEST(zookeeper_semaphore, ExpiredHolderIsToldAndItsPermitsComeBack) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b1 = dlock::open(uri);
  auto b2 = dlock::open(uri);
  const auto name = unique_name("sem-expired");
  auto held = b1->make_semaphore(name, 2)->try_acquire(2);
  ASSERT_TRUE(held);
  auto waiter_sem = b2->make_semaphore(name, 2);
  expect_granted_after_expiry(
      uri, held, [&] { return waiter_sem->try_acquire_for(30s, 2); }, "the expired holder's permits did not come back");
}

// ---- kazoo ----

// kazoo's WriteLock node (<hex>__lock__<seq>) is exclusive to us, its ReadLock node
// (<hex>__rlock__<seq>) shares with our readers: no option needed on kazoo's side.
TEST(zookeeper_rw_interop, KazooWriteLockExcludesOurReadersAndKazooReadLockSharesWithThem) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  {
    const auto name = unique_name("kazoo-write");
    kazoo_peer peer(uri, zk::parent_path(root_of(uri), name), "write");
    ASSERT_TRUE(peer.wait_for("acquired", 30s));
    auto rw = b->make_rw_lock(name);
    EXPECT_FALSE(rw->try_acquire_read()) << "kazoo's WriteLock holds, yet our reader got in";
    EXPECT_FALSE(rw->try_acquire_write());
    auto reader = std::async(std::launch::async, [&] {
      auto r = rw->try_acquire_read_for(30s);
      return r ? steady_seconds() : 0.0;
    });
    std::this_thread::sleep_for(300ms);  // time enough for a wrong grant to show
    peer.release();
    const auto kazoo_released = peer.wait_for("released", 30s);
    const double reader_granted = reader.get();
    ASSERT_GT(reader_granted, 0.0) << "kazoo released, yet our reader waited on";
    ASSERT_TRUE(kazoo_released);
    EXPECT_GT(reader_granted, *kazoo_released) << "our reader held beside kazoo's WriteLock";
  }
  {
    const auto name = unique_name("kazoo-read");
    kazoo_peer peer(uri, zk::parent_path(root_of(uri), name), "read");
    ASSERT_TRUE(peer.wait_for("acquired", 30s));
    auto rw = b->make_rw_lock(name);
    EXPECT_TRUE(rw->try_acquire_read()) << "kazoo's ReadLock holds, and our reader was kept out";
    EXPECT_FALSE(rw->try_acquire_write()) << "kazoo's ReadLock holds, yet our writer got in";
  }
}

// kazoo's recipes see only kazoo's node names unless given Curator's as extra_lock_patterns:
// with them, kazoo's WriteLock waits for our reader and kazoo's ReadLock for our writer.
TEST(zookeeper_rw_interop, KazooWithCuratorsPatternsWaitsForOurHolders) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  for (const auto side : {dlock::access::read, dlock::access::write}) {
    SCOPED_TRACE(std::string(dlock::to_string(side)));
    const auto name = unique_name("kazoo-waits");
    const auto parent = zk::parent_path(root_of(uri), name);
    auto held = b->make_rw_lock(name)->try_acquire(side);
    ASSERT_TRUE(held);
    const std::string kind = side == dlock::access::read ? "write" : "read";
    kazoo_peer peer(uri, parent, kind, {"__READ__", "__WRIT__"});
    auto zh = raw_connect(uri);
    wait_for_children(zh.get(), parent, 2);  // kazoo is queued
    std::this_thread::sleep_for(500ms);      // time enough for a wrong grant to show
    const double released = steady_seconds();
    held.release();
    const auto acquired = peer.wait_for("acquired", 30s);
    ASSERT_TRUE(acquired);
    EXPECT_GT(*acquired, released) << "kazoo's " << kind << " lock held beside our " << dlock::to_string(side);
  }
}

// kazoo's Semaphore keeps another layout (README); tests/kazoo_semaphore_peer.py takes Curator's
// InterProcessSemaphoreV2 steps with kazoo's Lock, and shares the permits with us.
TEST(zookeeper_semaphore_interop, KazooPeersOnCuratorsLayoutAndOursNeverExceedN) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  constexpr std::uint32_t n = 2;
  constexpr int rounds = 4;
  const auto name = unique_name("sem-kazoo");
  const auto path = zk::parent_path(root_of(uri), name);
  overlap_record record;
  std::vector<std::unique_ptr<dlock::testing::child_process>> peers;
  for (int i = 0; i < 2; ++i)
    peers.push_back(std::make_unique<dlock::testing::child_process>(
        std::vector<std::string>{"/usr/bin/python3", DLOCK_ZOOKEEPER_TEST_DIR "/kazoo_semaphore_peer.py", hosts_of(uri),
                                 path, std::to_string(n), std::to_string(rounds), "0.05"}));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(
        [&] { hold_permits(*dlock::open(uri)->make_semaphore(name, n), rounds, 60s, 50ms, record, failures); });
  for (auto& peer : peers) {
    double acquired = -1;  // the peer's current hold, if any
    for (;;) {
      const auto line = peer->read_line(60s);
      if (!line || *line == "done") {
        EXPECT_TRUE(line) << "a kazoo peer stopped early";
        break;
      }
      const auto t = std::stod(line->substr(line->find(' ') + 1));
      if (line->starts_with("acquired ")) {
        acquired = t;
      } else if (acquired >= 0) {
        record.add(acquired, t);
        acquired = -1;
      }
    }
    EXPECT_EQ(peer->wait(20s), 0);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(record.size(), 4u * rounds);
  EXPECT_LE(record.most_at_once(), static_cast<int>(n)) << "kazoo's and our holders exceeded " << n;
}
