// mysql+index's reader-writer lock and counting semaphore against a real MariaDB
// (DLOCK_MYSQL_URI), each test on tables of its own: readers together across backends and
// processes, a writer alone, a waiting writer holding back new readers (writer_preferred), a
// SIGKILLed holder's rows expiring within its ttl, a semaphore of N never N+1 and reaching N,
// max_count mismatches refused, a release after expiry reporting not_owner.
#include <gtest/gtest.h>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "../src/getlock_key.hpp"
#include "../src/getlock_semaphore.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/fork_child.hpp"
#include "dlock_test/signal_pipe.hpp"
#include "test_support.hpp"

namespace {

using dlock::testing::eventually;
using dlock::testing::fork_child;
using dlock::testing::signal_pipe;
using dlock::testing::wait_exit_code;
using namespace std::chrono_literals;
using namespace dlock::mysql;

// A child process that takes both permits of the 2-permit semaphore `name` through its own backend
// on `uri`, says so on `held`, and holds them until it is killed (exit 2 if it could not take them).
pid_t fork_holder_of_both_permits(const std::string& uri, const std::string& name, const signal_pipe& held) {
  return fork_child([&] {
    auto permits = dlock::open(uri)->make_semaphore(name, 2)->try_acquire_for(10s, 2);
    if (!permits) return 2;
    held.say('x');
    for (;;) std::this_thread::sleep_for(1s);
  });
}

// Threads taking and giving back one permit each of a semaphore of `n` named `name`, each through
// one of `backends` in turn, until `for_how_long` is over: the most permits they held at once and
// how many grants there were. `failed` when an acquire or release reported an error.
struct semaphore_contention {
  int most_at_once = 0;
  int grants = 0;
  bool failed = false;
};

semaphore_contention contend_for_semaphore(const std::vector<std::shared_ptr<dlock::backend>>& backends,
                                           const std::string& name, std::uint32_t n, int threads,
                                           std::chrono::steady_clock::duration for_how_long) {
  std::atomic<int> inside{0}, most{0}, grants{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> ts;
  const auto until = std::chrono::steady_clock::now() + for_how_long;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      auto sem = backends[t % backends.size()]->make_semaphore(name, n);
      while (std::chrono::steady_clock::now() < until) {
        std::error_code ec;
        auto permit = sem->try_acquire_for(1s, 1, ec);
        if (ec) {
          failed = true;
          return;
        }
        if (!permit) continue;
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        ++grants;
        std::this_thread::sleep_for(10ms);
        --inside;
        permit.release(ec);
        if (ec) failed = true;
      }
    });
  }
  for (auto& th : ts) th.join();
  return {most.load(), grants.load(), failed.load()};
}

class Primitives : public ::testing::Test {
 protected:
  std::string uri(std::string_view extra = "ttl=2s") const {
    return test::uri_for("mysql+index", "table=" + table_ + "&" + std::string(extra));
  }
  std::shared_ptr<dlock::backend> open(std::string_view extra = "ttl=2s") const { return dlock::open(uri(extra)); }
  // Whether a writer's mark on `name`'s anchor is live, read on a raw connection.
  bool writer_mark_live(const std::string& name) const {
    auto c = test::raw_connect(uri());
    std::unique_ptr<::sql::PreparedStatement> st(c->prepareStatement("SELECT writer_waiting_until > NOW(6) FROM `" +
                                                                     table_ + "_units` WHERE kind = 1 AND name = ?"));
    st->setString(1, name);
    std::unique_ptr<::sql::ResultSet> rs(st->executeQuery());
    return rs->next() && !rs->isNull(1) && rs->getInt(1) == 1;
  }
  std::string table_ = test::unique_table("p");
};

TEST_F(Primitives, CapabilitiesDeclared) {
  auto b = open();
  EXPECT_TRUE(b->caps().has(dlock::capability::read_write));
  EXPECT_TRUE(b->caps().has(dlock::capability::semaphore));
  EXPECT_TRUE(b->rw_caps().has(dlock::capability::writer_preferred));
  EXPECT_FALSE(b->rw_caps().has(dlock::capability::blocking));
  EXPECT_TRUE(b->semaphore_caps().has(dlock::capability::fencing));
}

TEST_F(Primitives, ReadersTogetherAcrossBackendsAndProcessesWriterExcluded) {
  const auto name = test::unique_name("rw");
  signal_pipe held, let_go;
  const std::string child_uri = uri();
  const pid_t child = fork_child([&] {
    auto b = dlock::open(child_uri);
    auto reading = b->make_rw_lock(name)->try_acquire_read_for(10s);
    if (!reading) return 2;
    held.say('x');
    let_go.hear();
    std::error_code ec;
    reading.release(ec);
    return ec ? 3 : 0;
  });
  ASSERT_EQ(held.hear(), 'x') << "the child process did not get its read lock";

  auto b1 = open();
  auto b2 = open();  // another pool: other sessions
  auto r1 = b1->make_rw_lock(name)->try_acquire_read();
  auto r2 = b2->make_rw_lock(name)->try_acquire_read();
  EXPECT_TRUE(r1) << "a reader must share with the other process's reader";
  EXPECT_TRUE(r2) << "a reader on other sessions must share too";
  auto writer = b1->make_rw_lock(name);
  EXPECT_FALSE(writer->try_acquire_write()) << "a writer must wait for the readers";
  r1.release();
  r2.release();
  EXPECT_FALSE(writer->try_acquire_write()) << "the other process still reads";
  EXPECT_TRUE(let_go.say('x'));
  EXPECT_EQ(wait_exit_code(child), 0);
  auto writing = writer->try_acquire_write();
  ASSERT_TRUE(writing) << "every reader is gone";
  EXPECT_FALSE(b2->make_rw_lock(name)->try_acquire_read()) << "no reader while a writer holds";
  EXPECT_FALSE(b2->make_rw_lock(name)->try_acquire_write()) << "no second writer";
}

TEST_F(Primitives, FencingTokensIncreasePerGrant) {
  auto b = open();
  auto rw = b->make_rw_lock(test::unique_name("f"));
  auto a = rw->try_acquire_read();
  auto c = rw->try_acquire_read();  // the same object, a second reader
  ASSERT_TRUE(a && c);
  ASSERT_TRUE(a.fencing_token() && c.fencing_token());
  EXPECT_LT(*a.fencing_token(), *c.fencing_token());
  a.release();
  c.release();
  auto w = rw->try_acquire_write();
  ASSERT_TRUE(w && w.fencing_token());
  EXPECT_LT(*c.fencing_token(), *w.fencing_token());
}

TEST_F(Primitives, WaitingWriterHoldsBackNewReaders) {
  auto b = open();
  const auto name = test::unique_name("wp");
  auto first_reader = b->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(first_reader);
  auto writer = b->make_rw_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return writer->try_acquire_write_for(20s); });
  // The writer's first miss marks the anchor.
  ASSERT_TRUE(eventually([&] { return writer_mark_live(name); }, 4s)) << "the waiting writer left no mark";
  auto late = open()->make_rw_lock(name);
  EXPECT_FALSE(late->try_acquire_read()) << "a reader arriving while a writer waits must not get in before it";
  first_reader.release();
  auto writing = waiting.get();
  ASSERT_TRUE(writing) << "the writer gets in once the reader that held before it leaves";
  EXPECT_FALSE(late->try_acquire_read());
  writing.release();
  EXPECT_FALSE(writer_mark_live(name)) << "the writer clears its mark once granted";
  EXPECT_TRUE(late->try_acquire_read()) << "readers enter again after the writer";
}

// The mutex counts as a writer here too: waiting behind readers, it marks the anchor as a waiting
// writer does, so new readers stay out and it gets in once the readers before it leave.
TEST_F(Primitives, AWaitingMutexHoldsBackNewReaders) {
  auto b = open();
  const auto name = test::unique_name("mp");
  auto first_reader = b->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(first_reader);
  auto mutex = open()->make_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return mutex->try_acquire_for(20s); });
  ASSERT_TRUE(eventually([&] { return writer_mark_live(name); }, 4s)) << "the waiting mutex left no mark";
  auto late = open()->make_rw_lock(name);
  EXPECT_FALSE(late->try_acquire_read()) << "a reader arriving while the mutex waits must not get in before it";
  first_reader.release();
  auto held = waiting.get();
  ASSERT_TRUE(held) << "the mutex gets in once the reader that held before it leaves";
  EXPECT_FALSE(writer_mark_live(name)) << "the mutex clears its mark once granted";
  EXPECT_FALSE(late->try_acquire_read()) << "the mutex excludes readers";
  held.release();
  EXPECT_TRUE(late->try_acquire_read()) << "readers enter again after the mutex";
}

TEST_F(Primitives, SigkilledWriterExpiresWithinTtl) {
  const auto name = test::unique_name("k");
  signal_pipe held;
  const std::string child_uri = uri("ttl=2s");
  const pid_t child = fork_child([&] {
    auto writing = dlock::open(child_uri)->make_rw_lock(name)->try_acquire_write_for(10s);
    if (!writing) return 2;
    held.say('x');
    for (;;) std::this_thread::sleep_for(1s);  // holding (and renewing) until killed
  });
  ASSERT_EQ(held.hear(), 'x');
  auto b = open("ttl=2s");
  auto rw = b->make_rw_lock(name);
  EXPECT_FALSE(rw->try_acquire_read());
  ::kill(child, SIGKILL);
  EXPECT_EQ(wait_exit_code(child), 128 + SIGKILL);
  // Its rows expire within the ttl after its last renewal; slack for polling only.
  auto writing = rw->try_acquire_write_for(2s + 1500ms);
  EXPECT_TRUE(writing) << "a SIGKILLed writer's grant must come back within its ttl";
}

TEST_F(Primitives, SigkilledSemaphoreHolderPermitsComeBack) {
  const auto name = test::unique_name("ks");
  signal_pipe held;
  const pid_t child = fork_holder_of_both_permits(uri("ttl=2s"), name, held);
  ASSERT_EQ(held.hear(), 'x');
  auto sem = open("ttl=2s")->make_semaphore(name, 2);
  EXPECT_FALSE(sem->try_acquire());
  ::kill(child, SIGKILL);
  wait_exit_code(child);
  EXPECT_TRUE(sem->try_acquire_for(2s + 1500ms, 2));
}

TEST_F(Primitives, SemaphoreNeverExceedsNFromManyThreadsAndReachesN) {
  constexpr std::uint32_t n = 3;
  constexpr int threads = 12;
  const auto seen = contend_for_semaphore({open(), open(), open()}, test::unique_name("s"), n, threads, 4s);
  EXPECT_FALSE(seen.failed);
  EXPECT_LE(seen.most_at_once, static_cast<int>(n)) << "more than N permits were held at once";
  EXPECT_EQ(seen.most_at_once, static_cast<int>(n)) << "N permits were never held at once";
  EXPECT_GT(seen.grants, threads);
}

TEST_F(Primitives, SemaphoreGrantsExactlyNPermits) {
  auto b = open();
  const auto name = test::unique_name("n");
  auto sem = b->make_semaphore(name, 3);
  auto two = sem->try_acquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(sem->try_acquire(2)) << "2 + 2 > 3";
  auto one = open()->make_semaphore(name, 3)->try_acquire();
  ASSERT_TRUE(one) << "the third permit is free";
  EXPECT_FALSE(sem->try_acquire()) << "all three are held";
  two.release();
  EXPECT_TRUE(sem->try_acquire(2));
}

TEST_F(Primitives, MaxCountMismatchIsRefused) {
  auto b = open();
  const auto name = test::unique_name("m");
  auto held = b->make_semaphore(name, 3)->try_acquire();
  ASSERT_TRUE(held);
  std::error_code ec;
  auto other = b->make_semaphore(name, 5)->try_acquire(1, ec);
  EXPECT_FALSE(other);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << ec.message();
  EXPECT_NE(dlock::last_error_message().find("max_count 3"), std::string::npos) << dlock::last_error_message();
  held.release();
  // Idle, the name takes the max_count of whoever comes next.
  EXPECT_TRUE(b->make_semaphore(name, 5)->try_acquire(1, ec)) << ec.message();
}

TEST_F(Primitives, ReleaseAfterExpiryReportsNotOwner) {
  auto b = open("ttl=1s");
  auto o = b->default_options();
  o.watchdog = false;
  const auto name = test::unique_name("e");
  auto permit = b->make_semaphore(name, 1, o)->try_acquire();
  auto reading = b->make_rw_lock(name + "-rw", o)->try_acquire_read();  // one name, one kind of lock
  ASSERT_TRUE(permit && reading);
  std::this_thread::sleep_for(1300ms);
  EXPECT_TRUE(b->make_semaphore(name, 1, o)->try_acquire()) << "the expired permit is free again";
  std::error_code ec;
  permit.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  reading.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST_F(Primitives, RenewKeepsTheGrantAndLostRenewalIsReported) {
  auto b = open("ttl=1s");
  auto o = b->default_options();
  o.watchdog = false;
  const auto name = test::unique_name("r");
  auto writing = b->make_rw_lock(name, o)->try_acquire_write();
  ASSERT_TRUE(writing);
  std::this_thread::sleep_for(600ms);
  writing.renew();
  std::this_thread::sleep_for(600ms);  // past the first ttl, within the renewed one
  EXPECT_FALSE(b->make_rw_lock(name, o)->try_acquire_read());
  std::this_thread::sleep_for(700ms);
  std::error_code ec;
  writing.renew(1s, ec);
  EXPECT_TRUE(ec) << "renewing an expired grant must fail";
  EXPECT_TRUE(writing.lost_token().stop_requested());
}

TEST_F(Primitives, WatchdogRenewsManyLeasesTogether) {
  auto b = open("ttl=1s");
  const auto base = test::unique_name("w");
  std::vector<dlock::lease> held;
  for (int i = 0; i < 40; ++i) held.push_back(b->make_semaphore(base + std::to_string(i % 4), 10)->try_acquire());
  for (const auto& l : held) ASSERT_TRUE(l);
  std::this_thread::sleep_for(2500ms);  // past two ttls: only the watchdog's renewals keep them
  for (int i = 0; i < 4; ++i)
    EXPECT_FALSE(b->make_semaphore(base + std::to_string(i), 10)->try_acquire()) << "all 10 permits still held";
  for (auto& l : held) {
    std::error_code ec;
    l.release(ec);
    EXPECT_FALSE(ec) << ec.message();
  }
}

TEST_F(Primitives, HostileNamesAreBoundNotPasted) {
  auto b = open();
  const auto base = test::unique_name("h");
  const std::string names[] = {base + "'; DROP TABLE x; --", base + std::string("\0a", 2), base + "\xff"};
  for (const auto& n : names) {
    auto w = b->make_rw_lock(n)->try_acquire_write();
    ASSERT_TRUE(w);
    std::error_code ec;
    EXPECT_FALSE(b->make_semaphore(n, 1)->try_acquire(ec));
    EXPECT_EQ(ec, dlock::errc::name_conflict) << "the semaphore of the very same name (bytes and all) is refused";
    EXPECT_TRUE(b->make_semaphore(n + "s", 1)->try_acquire()) << "and only that name";
  }
}

TEST_F(Primitives, SweepDeletesExpiredHoldersAndIdleAnchors) {
  auto b = open("ttl=1s");
  auto o = b->default_options();
  o.watchdog = false;
  const auto name = test::unique_name("sw"), rw_name = name + "-rw";  // one name, one kind of lock
  auto kept = b->make_semaphore(name, 2)->try_acquire();              // renewed by the watchdog: stays
  auto left = b->make_semaphore(name, 2, o)->try_acquire();
  auto idle = b->make_rw_lock(rw_name)->try_acquire_read();
  ASSERT_TRUE(kept && left && idle);
  idle.release();
  std::this_thread::sleep_for(1300ms);  // `left` expired
  auto count = [&](const std::string& suffix) {
    auto c = test::raw_connect(uri());
    const auto rows = [&](const std::string& n) {
      return test::query_int(*c, "SELECT COUNT(*) FROM `" + table_ + suffix + "` WHERE name = ?", n).value_or(-100);
    };
    return rows(name) + rows(rw_name);
  };
  EXPECT_EQ(count("_holders"), 2);
  EXPECT_EQ(count("_units"), 2);
  std::error_code ec;
  EXPECT_EQ(b->sweep_expired(ec), 2u) << "the expired holder and the idle reader-writer anchor";
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(count("_holders"), 1) << "the live holder stays";
  EXPECT_EQ(count("_units"), 1) << "the semaphore's anchor stays while it has a holder";
  EXPECT_FALSE(b->make_semaphore(name, 2)->try_acquire(2)) << "the live permit still counts";
  EXPECT_TRUE(b->make_rw_lock(rw_name)->try_acquire_write()) << "a swept anchor is made again";
}

// One name, one lock: the mutex (its row in the lock table), the reader-writer lock and the
// semaphore (holder rows) of one name, racing from two backends: a semaphore permit is never held
// beside a mutex or a reader, and the mutex never beside a reader or writer (the grants read each
// other's rows with shared locks; a deadlock between them is retried, never a double grant).
TEST_F(Primitives, RacingKindsOfOneNameAreNeverGrantedTogether) {
  const auto name = test::unique_name("race");
  auto a = open("ttl=5s"), b = open("ttl=5s");
  std::atomic<int> mutexes_in{0}, readers_in{0}, permits_in{0}, overlaps{0}, errors{0};
  std::atomic<int> granted[3] = {0, 0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      auto backend = t % 2 ? a : b;
      const int kind = t % 3;  // 0 mutex, 1 reader, 2 semaphore
      auto mutex = backend->make_lock(name);
      auto rw = backend->make_rw_lock(name);
      auto sem = backend->make_semaphore(name, 3);
      // 40 tries each, and on until its kind was granted once: two reader threads can keep the
      // name held for all of a semaphore thread's 40 tries, and the overlap check needs all kinds.
      const auto until = std::chrono::steady_clock::now() + 20s;
      for (int i = 0; i < 40 || (granted[kind].load() == 0 && std::chrono::steady_clock::now() < until); ++i) {
        std::error_code ec;
        auto l = kind == 0 ? mutex->try_acquire(ec) : kind == 1 ? rw->try_acquire_read(ec) : sem->try_acquire(ec);
        if (!l) {
          if (ec && ec != dlock::errc::name_conflict) ++errors;
          continue;
        }
        auto& mine = kind == 0 ? mutexes_in : kind == 1 ? readers_in : permits_in;
        ++mine;
        if ((kind == 0 && (readers_in.load() || permits_in.load())) ||
            (kind == 1 && (mutexes_in.load() || permits_in.load())) ||
            (kind == 2 && (mutexes_in.load() || readers_in.load())))
          ++overlaps;
        ++granted[kind];
        std::this_thread::sleep_for(1ms);
        --mine;
        l.release(ec);
        if (ec) ++errors;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "two kinds of lock of one name were held at once";
  EXPECT_EQ(errors.load(), 0);
  for (int k = 0; k < 3; ++k) EXPECT_GT(granted[k].load(), 0) << "kind " << k << " was never granted";
}

// A mutex waiting behind readers is granted once they leave (it polls, at most poll.max apart),
// and a waiting acquire refused as a conflict returns at once instead of waiting.
TEST_F(Primitives, AWaitingMutexIsGrantedAfterReadersAndAConflictDoesNotWait) {
  const auto name = test::unique_name("wait");
  auto a = open("ttl=20s&poll=10ms..200ms"), b = open("ttl=20s&poll=10ms..200ms");
  auto reading = a->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(reading);
  std::thread release([&] {
    std::this_thread::sleep_for(300ms);
    reading.release();
  });
  const auto start = std::chrono::steady_clock::now();
  auto mutex = b->make_lock(name)->try_acquire_for(10s);
  release.join();
  ASSERT_TRUE(mutex);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the mutex slept out the reader's ttl";
  mutex.release();
  auto permit = a->make_semaphore(name, 2)->try_acquire();
  ASSERT_TRUE(permit);
  std::error_code ec;
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_FALSE(b->make_lock(name)->try_acquire_for(5s, ec));
  EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s) << "a conflict must not wait";
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_write_for(5s, ec));
  EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 4s) << "a conflict must not wait";
}

// mysql+getlock: a semaphore as N GET_LOCK slots; no reader-writer lock.
class GetlockSemaphore : public ::testing::Test {
 protected:
  std::shared_ptr<dlock::backend> open() const { return dlock::open(test::uri_for("mysql+getlock", "ttl=2s")); }
};

TEST_F(GetlockSemaphore, DeclaresSemaphoreButNoReaderWriterLock) {
  auto b = open();
  EXPECT_TRUE(b->caps().has(dlock::capability::semaphore));
  EXPECT_FALSE(b->caps().has(dlock::capability::read_write));
  std::error_code ec;
  auto rw = b->make_rw_lock(test::unique_name("g"), ec);
  EXPECT_FALSE(rw);
  EXPECT_EQ(ec, dlock::errc::not_supported);
}

TEST_F(GetlockSemaphore, SlotKeysFitGetLockAndNeverEqualALockKey) {
  const std::string name = "abc";
  std::set<std::string> keys;
  for (std::uint32_t i = 0; i < 100; ++i) {
    const auto k = semaphore_slot_key(name, i);
    EXPECT_EQ(k.size(), getlock_max_key);
    EXPECT_EQ(k.front(), '%');
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), 100u);
  EXPECT_NE(getlock_key(semaphore_slot_key(name, 0)), semaphore_slot_key(name, 0))
      << "a lock named like a slot is hashed";
}

TEST_F(GetlockSemaphore, NeverExceedsNFromManyThreadsAndReachesN) {
  constexpr std::uint32_t n = 3;
  const auto seen = contend_for_semaphore({open(), open()}, test::unique_name("gs"), n, 10, 3s);
  EXPECT_FALSE(seen.failed) << dlock::last_error_message();
  EXPECT_LE(seen.most_at_once, static_cast<int>(n));
  EXPECT_EQ(seen.most_at_once, static_cast<int>(n));
}

TEST_F(GetlockSemaphore, PermitsTakenTogetherOrNotAtAll) {
  auto b = open();
  const auto name = test::unique_name("gp");
  auto sem = b->make_semaphore(name, 3);
  auto two = sem->try_acquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(open()->make_semaphore(name, 3)->try_acquire(2));
  auto one = open()->make_semaphore(name, 3)->try_acquire();
  EXPECT_TRUE(one) << "the failed attempt for 2 gave back the slot it took";
  ASSERT_TRUE(two.fencing_token() && one.fencing_token());
  EXPECT_LT(*two.fencing_token(), *one.fencing_token());
}

TEST_F(GetlockSemaphore, SigkilledHolderPermitsComeBack) {
  const auto name = test::unique_name("gk");
  signal_pipe held;
  const pid_t child = fork_holder_of_both_permits(test::uri_for("mysql+getlock", "ttl=2s"), name, held);
  ASSERT_EQ(held.hear(), 'x');
  auto sem = open()->make_semaphore(name, 2);
  EXPECT_FALSE(sem->try_acquire());
  ::kill(child, SIGKILL);
  wait_exit_code(child);
  EXPECT_TRUE(sem->try_acquire_for(5s, 2)) << "the server frees a dead connection's GET_LOCK slots";
}

TEST_F(GetlockSemaphore, KilledConnectionIsLostAndReleaseReportsNotOwner) {
  auto b = open();
  const auto name = test::unique_name("gx");
  auto permit = b->make_semaphore(name, 1)->try_acquire();
  ASSERT_TRUE(permit);
  auto admin = test::raw_connect(test::server_uri());
  const auto holder = test::query_int(*admin, "SELECT IS_USED_LOCK(?)", semaphore_slot_key(name, 0));
  ASSERT_TRUE(holder.has_value());
  test::kill_connection(*admin, *holder);
  EXPECT_TRUE(dlock::testing::fires_within(permit.lost_token(), 5s)) << "the watchdog's check notices the KILL";
  EXPECT_TRUE(open()->make_semaphore(name, 1)->try_acquire());
  std::error_code ec;
  permit.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST_F(GetlockSemaphore, UnrenewedLeaseIsCutAtItsValidityAndThePermitComesBack) {
  auto b = open();
  auto o = b->default_options();
  o.ttl = 600ms;
  o.watchdog = false;
  const auto name = test::unique_name("gv");
  auto permit = b->make_semaphore(name, 1, o)->try_acquire();
  ASSERT_TRUE(permit);
  std::this_thread::sleep_until(permit.valid_until());
  // Its connection is cut once the validity runs out, so the server frees the slot.
  EXPECT_TRUE(open()->make_semaphore(name, 1)->try_acquire_for(2s)) << "a lease no longer valid still held its slot";
  EXPECT_TRUE(permit.lost_token().stop_requested());
  std::error_code ec;
  permit.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

// One name, one lock on mysql+getlock: the mutex (GET_LOCK of the name) and the semaphore (N
// GET_LOCK slots) of one name refuse each other, each side checking the other once it holds its
// own lock. Racing from two backends, never both granted.
TEST_F(GetlockSemaphore, AMutexAndASemaphoreOfOneNameRefuseEachOtherAndNeverHoldTogether) {
  const auto name = test::unique_name("gone");
  auto a = open(), b = open();
  std::error_code ec;
  {
    auto mutex = a->make_lock(name)->try_acquire();
    ASSERT_TRUE(mutex);
    EXPECT_FALSE(b->make_semaphore(name, 3)->try_acquire_for(2s, ec));
    EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
    EXPECT_NE(dlock::last_error_message().find("in use as a mutex"), std::string::npos);
  }
  {
    auto permit = a->make_semaphore(name, 3)->try_acquire(2);
    ASSERT_TRUE(permit);
    EXPECT_FALSE(b->make_lock(name)->try_acquire_for(2s, ec));
    EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
    EXPECT_NE(dlock::last_error_message().find("in use as a semaphore (2 permits held"), std::string::npos)
        << dlock::last_error_message();
    auto c = test::raw_connect(test::uri_for("mysql+getlock"));
    EXPECT_EQ(test::query_int(*c, "SELECT IS_USED_LOCK(?) IS NULL", getlock_key(name)), 1)
        << "the refused mutex gave the name back";
  }
  EXPECT_TRUE(b->make_lock(name)->try_acquire())
      << "a name once used as a semaphore is a mutex again when no permit is held";

  // Racing kinds: conformance OneName.AMutexAndASemaphoreRacingForOneNameAreNeverBothGranted.
}

// The mutex checks the semaphores' table after GET_LOCK granted, not before it waited: a
// semaphore recorded and its slot taken while the mutex waits on the server for the name is seen
// once the name is granted (a check evaluated before GET_LOCK would miss both, and grant).
TEST_F(GetlockSemaphore, AMutexGrantedAfterAWaitSeesASemaphoreTakenMeanwhile) {
  const auto name = test::unique_name("gwait");
  auto holder = test::raw_connect(test::uri_for("mysql+getlock"));
  ASSERT_EQ(test::query_int(*holder, "SELECT GET_LOCK(?, 0)", getlock_key(name)), 1);
  auto waiter = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto l = open()->make_lock(name)->try_acquire_for(10s, ec);
    return std::make_pair(static_cast<bool>(l), ec);
  });
  std::this_thread::sleep_for(500ms);  // the mutex waits in GET_LOCK on the server now
  // A semaphore's steps, by hand (a dlock semaphore would see the name held and give up): record
  // the name, then take slot 0.
  auto sem = test::raw_connect(test::uri_for("mysql+getlock"));
  {
    std::unique_ptr<::sql::PreparedStatement> st(sem->prepareStatement(
        "INSERT INTO dlock_getlock_semaphores (name, max_count) VALUES (?, 2) ON DUPLICATE KEY UPDATE max_count = 2"));
    st->setString(1, getlock_key(name));
    st->executeUpdate();
  }
  ASSERT_EQ(test::query_int(*sem, "SELECT GET_LOCK(?, 0)", semaphore_slot_key(name, 0)), 1);
  ASSERT_EQ(test::query_int(*holder, "SELECT RELEASE_LOCK(?)", getlock_key(name)), 1);
  const auto [granted, ec] = waiter.get();
  EXPECT_FALSE(granted) << "the mutex was granted beside a held permit";
  EXPECT_EQ(ec, dlock::errc::name_conflict);
}

TEST_F(GetlockSemaphore, WithoutCreateSequenceTheSemaphoresTableMustExist) {
  try {
    (void)dlock::open(
        test::uri_for("mysql+getlock", "create_sequence=false&semaphore_table=" + test::unique_table("absent")));
    ADD_FAILURE() << "opened without its semaphores' table";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_error);
    EXPECT_NE(std::string(e.what()).find("semaphores' table"), std::string::npos) << e.what();
  }
}

}  // namespace
