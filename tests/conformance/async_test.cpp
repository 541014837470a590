// The asynchronous operations (dlock/asio.hpp), on every backend: waiters that hold no thread are
// granted one at a time as holders release, a canceled wait (a cancellation slot) completes with
// operation_aborted and leaves nothing behind, also when the cancel comes at the moment of a
// release, the timeout and the reader-writer and semaphore forms behave as the blocking ones, and a
// release made off the io_context's thread frees the name before it completes.
// The leases have a long ttl (20 s), so that anything left behind keeps the name far longer than
// the bounds below, which are correctness bounds for a loaded machine, not speed claims.
#include <dlock/asio.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "shared_primitives.hpp"

namespace dlock::conformance {
namespace {

constexpr auto long_ttl = 20s;
constexpr auto bound = 5s;

// The first grant of a test, through a server younger than a ttl (a Redis that just started grants
// nothing for a ttl: wait_after_restart).
lease granted_once_ready(distributed_lock& lock) { return lock.try_acquire_for(long_ttl + 2 * bound); }

}  // namespace

class Async : public SharedPrimitives {};

// Eight waiters of one name on one io_context thread, behind a holder: each is granted once, after
// the holder released, never two at a time (a grant keeps its lease for 20 ms on a timer, so an
// overlapping grant would find it inside), with rising fencing tokens where the backend fences.
TEST_P(Async, WaitersAreGrantedOneAtATimeAsHoldersRelease) {
  const auto name = dlock::testing::unique_name("async-turns");
  auto holder = make(name, options(long_ttl));
  auto held = granted_once_ready(*holder);
  ASSERT_TRUE(held);
  constexpr int waiters = 8;
  std::vector<std::unique_ptr<distributed_lock>> locks;
  for (int i = 0; i < waiters; ++i) locks.push_back(make(name, options(long_ttl)));
  asio::io_context io;
  int inside = 0, overlaps = 0, failures = 0;
  std::atomic<int> granted{0};
  std::optional<std::uint64_t> last_token;
  int tokens_not_rising = 0;
  for (int i = 0; i < waiters; ++i) {
    dlock::async_acquire(*locks[i], 60s, asio::bind_executor(io, [&](std::error_code ec, lease l) {
      if (ec || !l) {
        ADD_FAILURE() << "a waiter was not granted: " << (ec ? ec.message() : "timeout");
        ++failures;
        return;
      }
      if (++inside != 1) ++overlaps;
      ++granted;
      if (auto t = l.fencing_token()) {
        if (last_token && *t <= *last_token) ++tokens_not_rising;
        last_token = t;
      }
      auto hold = std::make_shared<asio::steady_timer>(io, 20ms);
      hold->async_wait([&, hold, l = std::make_shared<lease>(std::move(l))](auto) {
        --inside;
        l->release();
      });
    }));
  }
  std::thread runner([&] { io.run(); });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(granted.load(), 0) << "granted while the holder held the lock";
  held.release();
  runner.join();
  EXPECT_EQ(granted.load(), waiters);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(overlaps, 0) << "two waiters held the lock at once";
  EXPECT_EQ(tokens_not_rising, 0);
}

// A canceled wait completes with operation_aborted and an empty lease, and leaves nothing behind:
// once the holder releases, another contender is granted at once. Then the race: the cancel comes
// right at the release, many times; whatever the waiter got it gives back, and each time the next
// contender is granted within the bound (a grant that crossed the cancel is released at once).
TEST_P(Async, ACanceledWaitLeavesNothingBehindEvenAtTheMomentOfARelease) {
  const auto name = dlock::testing::unique_name("async-cancel");
  auto holder = make(name, options(long_ttl)), waiter = make(name, options(long_ttl)),
       next = make(name, options(long_ttl));
  auto held = granted_once_ready(*holder);
  ASSERT_TRUE(held);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  const auto start_wait = [&](asio::cancellation_signal& cancel) {
    auto outcome = std::make_shared<std::promise<std::pair<std::error_code, lease>>>();
    auto result = outcome->get_future();
    asio::post(io, [&, outcome] {
      // Bound to io, where the signal is emitted: Asio requires a slot's emits and its clearing (on
      // the handler's executor, at completion) not to run at once.
      dlock::async_acquire(
          *waiter, 60s,
          asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [outcome](std::error_code ec, lease l) {
                                         outcome->set_value({ec, std::move(l)});
                                       })));
    });
    return result;
  };
  {
    asio::cancellation_signal cancel;
    auto result = start_wait(cancel);
    std::this_thread::sleep_for(300ms);
    asio::post(io, [&] { cancel.emit(asio::cancellation_type::terminal); });
    ASSERT_EQ(result.wait_for(bound), std::future_status::ready) << "the canceled wait did not end";
    auto [ec, l] = result.get();
    EXPECT_EQ(ec, asio::error::operation_aborted) << ec.message();
    EXPECT_FALSE(l);
    held.release();
    auto again = next->try_acquire_for(bound);
    EXPECT_TRUE(again) << "the canceled waiter left something behind";
    held = std::move(again);
  }
  int granted_before_cancel = 0;
  for (int race = 0; race < 10 && held; ++race) {
    asio::cancellation_signal cancel;
    auto result = start_wait(cancel);
    std::this_thread::sleep_for(50ms);
    asio::post(io, [&] { cancel.emit(asio::cancellation_type::terminal); });
    held.release();
    ASSERT_EQ(result.wait_for(bound), std::future_status::ready) << "race " << race << ": the wait did not end";
    auto [ec, l] = result.get();
    if (l) {
      ++granted_before_cancel;
      l.release();
    } else {
      EXPECT_EQ(ec, asio::error::operation_aborted) << ec.message();
    }
    held = next->try_acquire_for(bound);
    EXPECT_TRUE(held) << "race " << race << ": the next contender was kept out";
  }
  std::cout << "[ races    ] the waiter was granted before its cancel in " << granted_before_cancel << " of 10\n";
  work.reset();
  runner.join();
}

// The timeout completes with an empty lease and no error; the reader-writer and semaphore forms
// wait and grant as the blocking ones, where the backend makes them.
TEST_P(Async, TheTimeoutAndTheOtherPrimitivesBehaveAsTheBlockingForms) {
  const auto name = dlock::testing::unique_name("async-forms");
  auto holder = make(name, options(long_ttl)), waiter = make(name, options(long_ttl));
  auto held = granted_once_ready(*holder);
  ASSERT_TRUE(held);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto timed_out = dlock::async_acquire(*waiter, 300ms, asio::use_future);
  ASSERT_EQ(timed_out.wait_for(bound), std::future_status::ready);
  EXPECT_FALSE(timed_out.get()) << "granted beside the holder";
  held.release();
  if (offers_rw()) {
    const auto rw_name = dlock::testing::unique_name("async-rw");
    auto writer = rw(rw_name, options(long_ttl)), reader = rw(rw_name, options(long_ttl));
    auto writing = writer->try_acquire_write_for(bound);
    ASSERT_TRUE(writing);
    auto reading = dlock::async_acquire_read(*reader, 60s, asio::use_future);
    EXPECT_EQ(reading.wait_for(300ms), std::future_status::timeout) << "a reader beside the writer";
    writing.release();
    ASSERT_EQ(reading.wait_for(bound), std::future_status::ready);
    EXPECT_TRUE(reading.get().held());
  }
  if (offers_semaphore()) {
    const auto sem_name = dlock::testing::unique_name("async-sem");
    auto full = sem(sem_name, 2, options(long_ttl)), waiting = sem(sem_name, 2, options(long_ttl));
    auto both = full->try_acquire_for(bound, 2);
    ASSERT_TRUE(both);
    auto one = dlock::async_acquire(*waiting, 1U, 60s, asio::use_future);
    EXPECT_EQ(one.wait_for(300ms), std::future_status::timeout) << "a third permit of 2";
    both.release();
    ASSERT_EQ(one.wait_for(bound), std::future_status::ready);
    EXPECT_TRUE(one.get().held());
  }
  work.reset();
  runner.join();
}

// A release without a round trip on the io_context's thread: it completes with no error once the
// server has freed the name (another contender takes it at once), and a semaphore's permits are
// given back the same way.
TEST_P(Async, AnAsyncReleaseFreesTheNameBeforeItCompletes) {
  const auto name = dlock::testing::unique_name("async-release");
  auto holder = make(name, options(long_ttl)), next = make(name, options(long_ttl));
  auto held = granted_once_ready(*holder);
  ASSERT_TRUE(held);
  // use_future: the completion runs on Asio's system executor, no io_context needed.
  auto released = dlock::async_release(std::move(held), asio::use_future);
  ASSERT_EQ(released.wait_for(bound), std::future_status::ready);
  EXPECT_NO_THROW(released.get());
  EXPECT_TRUE(next->try_acquire()) << "the name was still held once its release completed";
  if (offers_semaphore()) {
    const auto sem_name = dlock::testing::unique_name("async-release-sem");
    auto taker = sem(sem_name, 2, options(long_ttl)), other = sem(sem_name, 2, options(long_ttl));
    auto both = taker->try_acquire_for(bound, 2);
    ASSERT_TRUE(both);
    auto given_back = dlock::async_release(std::move(both), asio::use_future);
    ASSERT_EQ(given_back.wait_for(bound), std::future_status::ready);
    EXPECT_NO_THROW(given_back.get());
    EXPECT_TRUE(other->try_acquire(2)) << "the permits were still taken once their release completed";
  }
}

INSTANTIATE_TEST_SUITE_P(, Async, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance
