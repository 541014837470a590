// The fair hand-off of the core's polling wait (core/src/local_wait_queue.hpp): the waiters of
// one process for one name stand in a FIFO line, only the head asks the server, a release here
// wakes the head at once, and newcomers (the releaser included) queue behind. Counted on the
// test backend's attempts (its "server polls"); every wait below that could only end by a poll
// has a backoff of an hour, so a waiter that gets the lock was woken by the release.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "test_backend.hpp"

namespace {

using namespace dlock;
using namespace std::chrono_literals;

lock_options never_polling() {
  lock_options o;
  o.poll = {1h, 1h};
  return o;
}

// Waits (hang guard only) until the test server has seen `n` attempts in total.
void await_attempts(const core_test::table& t, int n) {
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (t.attempts.load() < n && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_GE(t.attempts.load(), n) << "the waiter never asked the server";
}

// Each of N threads, every one with its own lock object on one name, acquires and releases
// until the threads together made `total` cycles: each gets close to total/N. Before the line,
// the releasing thread took the lock again at once while the others slept between polls: on a
// server this fast, one thread made nearly every cycle.
TEST(FairHandoff, ThreadsOnOneNameShareItEvenly) {
  for (const int threads : {2, 8, 32}) {
    core_test::test_backend b({capability::expiring});
    constexpr int per_thread = 40;
    const int total = threads * per_thread;
    std::atomic<int> done{0};
    std::latch start(threads);
    std::vector<int> cycles(static_cast<std::size_t>(threads), 0);
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] {
        auto lock = b.make_lock("shared", never_polling());
        start.arrive_and_wait();
        while (done.load() < total) {
          auto held = lock->try_acquire_for(20s);
          if (!held) continue;
          if (done.fetch_add(1) < total) ++cycles[static_cast<std::size_t>(i)];
          std::this_thread::sleep_for(200us);  // holding a moment: every thread gets to join the line
        }
      });
    }
    for (auto& t : pool) t.join();
    const auto [least, most] = std::minmax_element(cycles.begin(), cycles.end());
    // Strict FIFO gives each thread per_thread +- 1; the bound leaves room for a thread that
    // started late.
    EXPECT_GE(*least, per_thread / 2) << threads << " threads: a waiter starved";
    EXPECT_LE(*most, per_thread * 2) << threads << " threads: a thread kept taking the lock again";
  }
}

// A release here wakes the head at once: it asks the server once more and gets the lock, with no
// poll in between (its backoff is an hour).
TEST(FairHandoff, AReleaseWakesTheHeadWithoutItsBackoff) {
  core_test::test_backend b({capability::expiring});
  auto holder = b.make_lock("wake", never_polling());
  auto waiter = b.make_lock("wake", never_polling());
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  auto got = std::async(std::launch::async, [&] { return static_cast<bool>(waiter->try_acquire_for(10min)); });
  await_attempts(*b.t, 2);  // the holder's grant and the waiter's first attempt
  held.release();
  ASSERT_EQ(got.wait_for(60s), std::future_status::ready) << "the waiter slept its backoff through the release";
  EXPECT_TRUE(got.get());
  EXPECT_EQ(b.t->attempts.load(), 3) << "exactly one attempt after the release, none by polling";
}

// Only the head asks the server: waiters behind it make no attempt at all while it is held.
TEST(FairHandoff, OnlyTheHeadAsksTheServer) {
  core_test::test_backend b({capability::expiring});
  lock_options o;
  o.poll = {1ms, 1ms};  // the head polls hard; the others must not
  auto holder = b.make_lock("head", o);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  std::vector<std::future<bool>> waiters;
  std::vector<std::unique_ptr<distributed_lock>> locks;
  for (int i = 0; i < 4; ++i) locks.push_back(b.make_lock("head", o));
  for (auto& l : locks)
    waiters.push_back(std::async(std::launch::async, [&l] { return static_cast<bool>(l->try_acquire_for(300ms)); }));
  for (auto& w : waiters) EXPECT_FALSE(w.get());
  // The head polled every millisecond for 300 ms; four polling waiters would have made four
  // times as many attempts. Generous: the head alone makes at most ~300.
  EXPECT_LT(b.t->attempts.load(), 1 + 400) << "waiters behind the head polled the server";
  EXPECT_GT(b.t->attempts.load(), 1 + 4);
}

// The releaser coming straight back, with a try or with a wait, queues behind the waiter that
// was there first.
TEST(FairHandoff, ANewcomerDoesNotOvertakeAWaiter) {
  core_test::test_backend b({capability::expiring});
  auto first = b.make_lock("order", never_polling());
  auto second = b.make_lock("order", never_polling());
  auto held = first->try_acquire();
  ASSERT_TRUE(held);
  std::atomic<int> order{0};
  int second_at = -1, again_at = -1;
  std::promise<void> tried;
  auto tried_future = tried.get_future();
  auto waiter = std::async(std::launch::async, [&] {
    if (auto l = second->try_acquire_for(20s)) {
      second_at = order++;
      tried_future.wait();  // holding until the try below was made
    }
  });
  await_attempts(*b.t, 2);
  held.release();
  EXPECT_FALSE(first->try_acquire()) << "a try overtook the waiter already in line";
  tried.set_value();
  if (auto l = first->try_acquire_for(20s)) again_at = order++;
  waiter.get();
  EXPECT_EQ(second_at, 0) << "the waiter did not get the lock first";
  EXPECT_EQ(again_at, 1) << "the releaser, in line behind it, did not get it next";
}

// A waiter behind the head leaves the line at its deadline without asking the server (it would
// overtake the head); a head that leaves at its deadline hands the head on, and the next one
// asks at once.
TEST(FairHandoff, QueuedWaitersKeepTheirDeadlines) {
  core_test::test_backend b({capability::expiring});
  auto holder = b.make_lock("deadline", never_polling());
  auto head = b.make_lock("deadline", never_polling());
  auto behind = b.make_lock("deadline", never_polling());
  auto last = b.make_lock("deadline", never_polling());
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  auto head_wait = std::async(std::launch::async, [&] { return static_cast<bool>(head->try_acquire_for(400ms)); });
  await_attempts(*b.t, 2);
  const auto behind_deadline = std::chrono::steady_clock::now() + 100ms;
  auto behind_wait = std::async(std::launch::async, [&] { return behind->try_acquire_until(behind_deadline); });
  auto last_wait = std::async(std::launch::async, [&] { return static_cast<bool>(last->try_acquire_for(10min)); });
  EXPECT_FALSE(behind_wait.get());
  EXPECT_GE(std::chrono::steady_clock::now(), behind_deadline) << "left the line before its deadline";
  EXPECT_EQ(b.t->attempts.load(), 2) << "a waiter behind the head asked the server";
  // The head's deadline: its last attempt at the deadline, then `last` becomes head and asks at once.
  EXPECT_FALSE(head_wait.get());
  await_attempts(*b.t, 4);
  EXPECT_EQ(last_wait.wait_for(0s), std::future_status::timeout);
  held.release();
  ASSERT_EQ(last_wait.wait_for(60s), std::future_status::ready) << "the new head was not woken";
  EXPECT_TRUE(last_wait.get());
}

// A reentrant owner re-entering while others wait for it does not queue behind them: they wait
// for its very grant, so queueing would leave both waiting until their deadlines.
TEST(FairHandoff, AReentrantOwnersReentryIsNotQueued) {
  core_test::test_backend b({capability::expiring, capability::reentrant});
  auto mine = b.make_lock("reentry", never_polling());
  auto theirs = b.make_lock("reentry", never_polling());
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  auto waiting = std::async(std::launch::async, [&] { return static_cast<bool>(theirs->try_acquire_for(20s)); });
  await_attempts(*b.t, 2);
  auto inner = mine->try_acquire();
  EXPECT_TRUE(inner) << "a try of the holding owner was refused for the waiters behind it";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto waited = mine->try_acquire_until(deadline);
  EXPECT_TRUE(waited);
  EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "the holding owner queued behind its own waiters";
  waited.release();
  inner.release();
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "the waiter got a lock still held once";
  outer.release();
  EXPECT_TRUE(waiting.get());
}

}  // namespace
