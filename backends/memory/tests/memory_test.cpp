// memory:// behaviour beyond the shared conformance suite: FIFO hand-off with many waiters,
// reentrancy hold counting, expiry marking the old lease lost, namespaces kept apart.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "memory_backend.hpp"

namespace dlock {
void register_memory(registry& r);
}

namespace {

using namespace std::chrono_literals;

std::shared_ptr<dlock::backend> open_memory(std::string_view uri) {
  static dlock::registry* r = [] {
    auto* reg = new dlock::registry();
    dlock::register_memory(*reg);
    return reg;
  }();
  return r->open(uri);
}

using dlock::testing::unique_name;

dlock::lock_options no_watchdog(std::chrono::milliseconds ttl) {
  dlock::lock_options o;
  o.ttl = ttl;
  o.watchdog = false;
  return o;
}

// Waits until `n` waiters queue on `name`; false after 10 s (a hang guard).
bool wait_for_waiters(const std::string& ns, const std::string& name, std::size_t n) {
  auto t = dlock::memory::table_for(ns);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (t->waiting(name) < n)
    if (std::chrono::steady_clock::now() > give_up)
      return false;
    else
      std::this_thread::yield();
  return true;
}

TEST(Memory, IsBuiltIntoTheDefaultRegistry) {
  EXPECT_TRUE(dlock::default_registry().contains("memory"));
  EXPECT_EQ(dlock::open("memory://")->caps(),
            dlock::with_primitives(dlock::memory::memory_caps, dlock::memory::memory_primitives));
  EXPECT_EQ(dlock::open("memory://")->rw_caps(), *dlock::memory::memory_primitives.rw_lock);
  EXPECT_EQ(dlock::open("memory://")->semaphore_caps(), *dlock::memory::memory_primitives.semaphore);
}

TEST(Memory, DeclaresEveryCapabilityAndProcessScope) {
  auto b = open_memory("memory://");
  for (auto c : dlock::all_capabilities) EXPECT_TRUE(b->caps().has(c)) << dlock::to_string(c);
  EXPECT_EQ(b->scope(), dlock::lock_scope::process);
}

TEST(Memory, WaitersAreGrantedInArrivalOrderAndNobodyBarges) {
  auto b = open_memory("memory://fifo");
  const auto name = unique_name("fifo");
  auto holder_lock = b->make_lock(name);
  auto held = holder_lock->acquire();

  constexpr int waiters = 8;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < waiters; ++i) locks.push_back(b->make_lock(name));
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = locks[i]->acquire();
      std::lock_guard guard(order_mutex);
      order.push_back(i);
    });  // the lease is released when it goes out of scope, handing over to the next waiter
    EXPECT_TRUE(wait_for_waiters("fifo", name, static_cast<std::size_t>(i) + 1));  // i+1 queued: arrival order is fixed
  }
  // A newcomer is refused while others queue, even the instant the lock is handed over.
  auto newcomer = b->make_lock(name);
  EXPECT_FALSE(newcomer->try_acquire());
  held.release();
  for (auto& t : threads) t.join();
  std::vector<int> expected;
  for (int i = 0; i < waiters; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
  EXPECT_TRUE(newcomer->try_acquire());
}

TEST(Memory, ReentrantLeasesCountHoldsAndShareTheToken) {
  auto b = open_memory("memory://");
  const auto name = unique_name("reentrant");
  auto mine = b->make_lock(name);
  auto theirs = b->make_lock(name);
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = mine->try_acquire();
  ASSERT_TRUE(inner) << "the same lock object must re-enter";
  EXPECT_EQ(outer.fencing_token(), inner.fencing_token()) << "a re-entrant hold joins the grant";
  EXPECT_FALSE(theirs->try_acquire());

  outer.release();  // releasing the outer lease first only drops one hold
  EXPECT_FALSE(theirs->try_acquire());
  EXPECT_TRUE(dlock::memory::is_held("", name));
  outer.release();  // a second release of the same lease is a no-op, not a second decrement
  EXPECT_FALSE(theirs->try_acquire());

  inner.release();
  EXPECT_FALSE(dlock::memory::is_held("", name));
  auto next = theirs->try_acquire();
  ASSERT_TRUE(next);
  EXPECT_GT(*next.fencing_token(), *inner.fencing_token());
}

TEST(Memory, SameOwnerOnTwoLockObjectsIsOneOwner) {
  auto b = open_memory("memory://");
  const auto name = unique_name("owner");
  dlock::lock_options o;
  o.owner = "worker-7";
  auto a1 = b->make_lock(name, o);
  auto a2 = b->make_lock(name, o);
  auto l1 = a1->try_acquire();
  auto l2 = a2->try_acquire();
  EXPECT_TRUE(l1);
  EXPECT_TRUE(l2);
}

TEST(Memory, ExpiredGrantGoesToTheWaiterAndTheOldLeaseIsLost) {
  auto b = open_memory("memory://");
  const auto name = unique_name("expiry");
  auto dead = b->make_lock(name, no_watchdog(300ms));  // never renews: a stuck holder
  auto stale = dead->try_acquire();
  ASSERT_TRUE(stale);
  ASSERT_NE(stale.valid_until(), dlock::lease::clock::time_point::max());
  auto waiter = b->make_lock(name, no_watchdog(5s));
  auto fresh = waiter->try_acquire_for(10s);
  ASSERT_TRUE(fresh) << "the grant must expire after its 300ms ttl";
  EXPECT_TRUE(stale.lost_token().stop_requested());
  EXPECT_EQ(stale.lost_reason(), dlock::errc::lock_lost);
  EXPECT_GT(*fresh.fencing_token(), *stale.fencing_token());
  std::error_code ec;
  stale.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(fresh.held());
  EXPECT_TRUE(dlock::memory::is_held("", name)) << "the stale release must not free the new grant";
}

TEST(Memory, ExpiredGrantReleasedLateIsNotOwnerEvenWithoutATakeover) {
  auto b = open_memory("memory://");
  const auto name = unique_name("late");
  auto held = b->make_lock(name, no_watchdog(100ms))->try_acquire();
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(dlock::memory::is_held("", name));
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(Memory, RenewKeepsTheGrantPastItsTtl) {
  auto b = open_memory("memory://");
  const auto name = unique_name("renew");
  auto held = b->make_lock(name, no_watchdog(400ms))->try_acquire();
  ASSERT_TRUE(held);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(150ms);
    held.renew();
  }
  EXPECT_TRUE(dlock::memory::is_held("", name)) << "600ms after a 400ms grant, renewed every 150ms";
  EXPECT_FALSE(held.lost_token().stop_requested());
  held.release();
}

TEST(Memory, WatchdogRenewsByDefault) {
  auto b = open_memory("memory://?ttl=300ms");
  const auto name = unique_name("watchdog");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(dlock::memory::is_held("", name));
  EXPECT_TRUE(held.held());
}

TEST(Memory, BreakMarksEveryReentrantLeaseLostAndHandsOver) {
  auto b = open_memory("memory://");
  const auto name = unique_name("break");
  auto mine = b->make_lock(name);
  auto outer = mine->try_acquire();
  auto inner = mine->try_acquire();
  ASSERT_TRUE(outer && inner);
  std::atomic<bool> callback_ran{false};
  std::stop_callback on_lost(outer.lost_token(), [&] { callback_ran = true; });

  auto theirs = b->make_lock(name);
  dlock::lease taken;
  std::thread waiter([&] { taken = theirs->acquire(); });
  EXPECT_TRUE(wait_for_waiters("", name, 1));
  EXPECT_TRUE(dlock::memory::break_grant("", name));
  waiter.join();
  EXPECT_TRUE(taken);
  EXPECT_TRUE(callback_ran);
  EXPECT_EQ(outer.lost_reason(), dlock::errc::lock_lost);
  EXPECT_EQ(inner.lost_reason(), dlock::errc::lock_lost);
  std::error_code ec;
  inner.renew(1s, ec);
  EXPECT_TRUE(ec == dlock::errc::lock_lost || ec == dlock::errc::not_owner) << ec.message();
  outer.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(Memory, TimedOutWaiterLeavesTheQueue) {
  auto b = open_memory("memory://");
  const auto name = unique_name("timeout");
  auto holder = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(holder);
  auto late = b->make_lock(name);
  EXPECT_FALSE(late->try_acquire_for(50ms));
  EXPECT_EQ(dlock::memory::table_for("")->waiting(name), 0u);
  holder.release();
  EXPECT_TRUE(late->try_acquire()) << "a waiter that gave up must not keep a place in the queue";
}

TEST(Memory, NamespacesAreSeparateAndSharedByName) {
  const auto name = unique_name("ns");
  auto a = open_memory("memory://alpha");
  auto a_again = open_memory("memory://alpha");
  auto beta = open_memory("memory://beta");
  auto def = open_memory("memory://");
  auto held = a->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(a_again->make_lock(name)->try_acquire()) << "one namespace, one table";
  EXPECT_FALSE(open_memory("memory://alpha/")->make_lock(name)->try_acquire())
      << "a trailing '/' names no other namespace";
  EXPECT_TRUE(beta->make_lock(name)->try_acquire());
  EXPECT_TRUE(def->make_lock(name)->try_acquire());
  auto in_default = def->make_lock(name + "-default")->try_acquire();
  ASSERT_TRUE(in_default);
  EXPECT_FALSE(open_memory("memory:///")->make_lock(name + "-default")->try_acquire()) << "memory:/// is memory://";
  EXPECT_TRUE(open_memory("memory://Alpha")->make_lock(name)->try_acquire()) << "namespaces are case-sensitive";
}

TEST(Memory, NamesAreAnyBytesUpTo64KiB) {
  auto b = open_memory("memory://");
  const std::string odd("a\0b/..\xff", 7);
  auto l1 = b->make_lock(odd)->try_acquire();
  ASSERT_TRUE(l1);
  EXPECT_TRUE(b->make_lock(std::string("a\0c/..\xff", 7))->try_acquire());
  EXPECT_TRUE(b->make_lock("A")->try_acquire());
  auto lower = b->make_lock("a")->try_acquire();
  EXPECT_TRUE(lower) << "names are case-sensitive";
  EXPECT_TRUE(b->make_lock(std::string(64 * 1024, 'x'))->try_acquire());
  try {
    (void)b->make_lock(std::string(64 * 1024 + 1, 'x'));
    FAIL() << "a name over 64 KiB must be refused";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::invalid_name);
  }
}

TEST(Memory, UriWithUserPortOrUnknownKeyIsRefused) {
  for (const char* bad : {"memory://user@ns", "memory://ns:12", "memory://ns?colour=blue"}) {
    try {
      (void)open_memory(bad);
      ADD_FAILURE() << bad << " must be refused";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << bad << ": " << e.what();
    }
  }
}

// One name, one lock: the mutex is a writer of its name's pool, so mutex, writers and readers
// stand in one FIFO queue and a release hands the name on in arrival order, whatever the kinds.
TEST(Memory, MutexWritersAndReadersOfANameWaitInOneQueueInArrivalOrder) {
  auto b = open_memory("memory://one-queue");
  const auto name = unique_name("one-queue");
  auto reading = b->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(reading);
  std::mutex order_mutex;
  std::vector<std::string> order;
  const auto record = [&](const char* who, dlock::lease held) {
    {
      std::lock_guard guard(order_mutex);
      order.push_back(who);
    }
    std::this_thread::sleep_for(20ms);  // holds a moment: those behind must wait for it
    held.release();
  };
  auto mutex = b->make_lock(name);
  auto writer = b->make_rw_lock(name);
  auto late_reader = b->make_rw_lock(name);
  std::thread t1([&] { record("mutex", mutex->acquire()); });
  EXPECT_TRUE(wait_for_waiters("one-queue", name, 1)) << "the mutex did not wait behind the reader";
  std::thread t2([&] { record("writer", writer->acquire_write()); });
  EXPECT_TRUE(wait_for_waiters("one-queue", name, 2));
  std::thread t3([&] { record("reader", late_reader->acquire_read()); });
  EXPECT_TRUE(wait_for_waiters("one-queue", name, 3));
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_read()) << "a waiting mutex holds back new readers";
  reading.release();
  for (auto* t : {&t1, &t2, &t3}) t->join();
  EXPECT_EQ(order, (std::vector<std::string>{"mutex", "writer", "reader"}));
}

// The mutex stays reentrant beside readers waiting for it: its owner's re-entry joins the grant
// instead of queueing behind them (who wait for that very grant).
TEST(Memory, AMutexReentersPastReadersWaitingForIt) {
  auto b = open_memory("memory://reenter-rw");
  const auto name = unique_name("reenter-rw");
  auto mine = b->make_lock(name);
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  dlock::lease read;
  std::thread reader([&] { read = b->make_rw_lock(name)->acquire_read(); });
  EXPECT_TRUE(wait_for_waiters("reenter-rw", name, 1)) << "the reader did not wait behind the mutex";
  auto inner = mine->try_acquire_for(1s);
  EXPECT_TRUE(inner) << "the owner's re-entry must not queue behind a reader waiting for its grant";
  EXPECT_EQ(inner.fencing_token(), outer.fencing_token());
  outer.release();
  EXPECT_EQ(dlock::memory::table_for("reenter-rw")->waiting(name), 1u) << "one hold of the mutex is left";
  inner.release();
  reader.join();
  ASSERT_TRUE(read);
  EXPECT_GT(*read.fencing_token(), *inner.fencing_token()) << "one token sequence for the name";
}

// A semaphore and a lock of one name: refused at once by the waiting forms too (an hour of
// waiting must not be slept), and the name is free for either use again once idle.
TEST(Memory, ASemaphoreAndALockOfOneNameAreRefusedWithoutWaiting) {
  auto b = open_memory("memory://");
  const auto name = unique_name("conflict");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  auto permit = b->make_semaphore(name, 3)->try_acquire_for(1h, 1, ec);
  EXPECT_FALSE(permit);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "a conflict must not wait";
  EXPECT_EQ(dlock::memory::table_for("")->waiting(name), 0u);
  held.release();

  auto sem = b->make_semaphore(name, 3);
  auto two = sem->try_acquire(2);
  ASSERT_TRUE(two) << "the name is free again once the mutex is released";
  auto write = b->make_rw_lock(name)->try_acquire_write_for(1h, ec);
  EXPECT_FALSE(write);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  EXPECT_NE(dlock::last_error_message().find("in use as a semaphore (2 of 3 permits held)"), std::string::npos)
      << dlock::last_error_message();
  EXPECT_TRUE(two.held());
  EXPECT_TRUE(sem->try_acquire()) << "the refused writer took nothing from the semaphore";
}

}  // namespace

TEST(MemoryInspection, InspectNamesEachHolderWithItsKindAndTheQueuedWaiters) {
  auto b = open_memory("memory://inspect");
  const auto name = unique_name("inspect");
  EXPECT_FALSE(b->inspect(name).held);

  auto holder_lock = b->make_lock(name, no_watchdog(60s));
  auto held = holder_lock->acquire();
  auto waiting_lock = b->make_lock(name);
  std::thread waiter([&] { auto l = waiting_lock->acquire(); });
  ASSERT_TRUE(wait_for_waiters("inspect", name, 1));

  const auto info = b->inspect(name);
  EXPECT_EQ(info.name, name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, holder_lock->owner());
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::mutex);
  EXPECT_EQ(info.holders[0].fencing_token, held.fencing_token());
  ASSERT_TRUE(info.holders[0].ttl_left);
  EXPECT_LE(*info.holders[0].ttl_left, 60s);
  EXPECT_TRUE(info.holders[0].since);
  ASSERT_TRUE(info.waiters_known);
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_EQ(info.waiters[0].owner, waiting_lock->owner());

  held.release();
  waiter.join();
  EXPECT_FALSE(b->inspect(name).held);
}

TEST(MemoryInspection, InspectTellsReadersWritersAndPermits) {
  auto b = open_memory("memory://inspect");
  const auto rw_name = unique_name("inspect-rw");
  auto rw = b->make_rw_lock(rw_name);
  auto r1 = rw->try_acquire_read();
  ASSERT_TRUE(r1);
  auto info = b->inspect(rw_name);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::read);
  EXPECT_EQ(info.holders[0].owner, rw->owner());
  r1.release();
  auto w = rw->try_acquire_write();
  ASSERT_TRUE(w);
  info = b->inspect(rw_name);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::write);

  const auto sem_name = unique_name("inspect-sem");
  auto sem = b->make_semaphore(sem_name, 5);
  auto permits = sem->try_acquire(3);
  ASSERT_TRUE(permits);
  info = b->inspect(sem_name);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::permits);
  EXPECT_EQ(info.holders[0].count, 3u);
}

TEST(MemoryInspection, ListGivesTheHeldNamesUnderThePrefix) {
  auto b = open_memory("memory://list");
  const auto prefix = unique_name("list") + "/";
  auto a = b->make_lock(prefix + "a");
  auto c = b->make_lock(prefix + "c");
  auto other = b->make_lock(unique_name("elsewhere"));
  auto la = a->acquire();
  auto lc = c->acquire();
  auto lo = other->acquire();
  EXPECT_EQ(b->list(prefix), (std::vector<std::string>{prefix + "a", prefix + "c"}));
  lc.release();
  EXPECT_EQ(b->list(prefix), (std::vector<std::string>{prefix + "a"}));
}

TEST(MemoryInspection, ForceReleaseRemovesTheGrantAndTheHolderLearnsItIsLost) {
  auto b = open_memory("memory://break");
  const auto name = unique_name("break");
  auto stuck = b->make_lock(name, no_watchdog(60s));
  auto held = stuck->acquire();
  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, stuck->owner());
  EXPECT_TRUE(held.lost_token().stop_requested());
  EXPECT_FALSE(b->inspect(name).held);
  auto next = b->make_lock(name);
  EXPECT_TRUE(next->try_acquire());
  EXPECT_TRUE(b->force_release(unique_name("never-held")).empty());
}

TEST(MemoryInspection, NamesAreCheckedAsMakeLockChecksThem) {
  auto b = open_memory("memory://");
  std::error_code ec;
  (void)b->inspect("", ec);
  EXPECT_EQ(ec, dlock::errc::invalid_name);
  (void)b->force_release("", ec);
  EXPECT_EQ(ec, dlock::errc::invalid_name);
}

TEST(DefaultOwnerId, NamesHostAndPidAndDiffersPerLockObject) {
  auto b = open_memory("memory://");
  auto one = b->make_lock("owner-id");
  auto two = b->make_lock("owner-id");
  const auto pid = ":" + std::to_string(getpid()) + ":";
  EXPECT_NE(one->owner().find(pid), std::string::npos) << one->owner();
  EXPECT_NE(one->owner(), two->owner());
}
