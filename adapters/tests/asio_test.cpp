// dlock/asio.hpp on standalone Asio: the cases both flavours pass (async_cases.ipp), then what only
// standalone Asio has: C++20 coroutines, per-operation cancellation slots (bind_cancellation_slot,
// parallel_group, awaitable_operators' ||), as_tuple and deferred.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

using namespace std::chrono_literals;

#define ASYNC_NET ::asio
#define ASYNC_API ::dlock
namespace {
// How this flavour's canceled operations complete.
bool is_canceled(std::error_code ec) { return ec == asio::error::operation_aborted; }
}  // namespace
#include "async_cases.ipp"

namespace {

using asio::experimental::as_tuple;

// A name held by one memory:// lock, with a second lock of it to wait and a third for afterwards.
struct held_name {
  std::shared_ptr<dlock::backend> backend = dlock::open("memory://");
  std::string name;
  std::unique_ptr<dlock::distributed_lock> holder = backend->make_lock(name), waiter = backend->make_lock(name),
                                           next = backend->make_lock(name);
  dlock::lease held = holder->try_acquire();

  explicit held_name(const std::string& what) : name(unique(what)) {}
};

// co_await in a coroutine: a free lock, then a contended one whose holder releases meanwhile.
TEST(AsioAwaitable, ACoroutineAwaitsTheLock) {
  held_name n("awaitable");
  ASSERT_TRUE(n.held);
  asio::io_context io;
  bool granted = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, lease] = co_await dlock::async_acquire(*n.waiter, 10s, as_tuple(asio::use_awaitable));
        EXPECT_FALSE(ec);
        granted = lease.held();
      },
      asio::detached);
  asio::steady_timer release(io, 200ms);
  release.async_wait([&](auto) { n.held.release(); });
  io.run();
  EXPECT_TRUE(granted);
}

// A cancellation slot: the emitted signal completes the wait with operation_aborted and an empty
// lease; the next contender is granted once the holder releases.
TEST(AsioCancellation, ABoundCancellationSlotCancelsTheWait) {
  held_name n("slot");
  ASSERT_TRUE(n.held);
  asio::io_context io;
  asio::cancellation_signal cancel;
  std::optional<std::pair<std::error_code, dlock::lease>> outcome;
  dlock::async_acquire(
      *n.waiter, 30s,
      asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [&](std::error_code ec, dlock::lease l) {
                                     outcome.emplace(ec, std::move(l));
                                   })));
  asio::steady_timer settle(io, 200ms);
  settle.async_wait([&](auto) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->first, asio::error::operation_aborted) << outcome->first.message();
  EXPECT_FALSE(outcome->second);
  n.held.release();
  EXPECT_TRUE(n.next->try_acquire_for(5s));
}

// awaitable_operators' ||: a timer that wins cancels the acquire; the acquire that wins cancels the timer.
TEST(AsioCancellation, ATimerRacedWithOrCancelsTheLosingAcquire) {
  using namespace asio::experimental::awaitable_operators;
  held_name n("or");
  ASSERT_TRUE(n.held);
  asio::io_context io;
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 200ms);
        auto result = co_await (dlock::async_acquire(*n.waiter, 30s, asio::use_awaitable) ||
                                timer.async_wait(asio::use_awaitable));
        winner = result.index();
      },
      asio::detached);
  io.run();
  ASSERT_TRUE(winner);
  EXPECT_EQ(*winner, 1U) << "the acquire won while the lock was held";
  n.held.release();
  EXPECT_TRUE(n.waiter->try_acquire()) << "the canceled acquire left the lock taken";
}

// parallel_group with deferred operations: wait_for_one cancels the acquire the timer beat.
TEST(AsioCancellation, AParallelGroupCancelsTheAcquireItDoesNotWaitFor) {
  held_name n("group");
  ASSERT_TRUE(n.held);
  asio::io_context io;
  asio::steady_timer timer(io, 200ms);
  std::optional<std::error_code> acquire_error;
  asio::experimental::make_parallel_group(dlock::async_acquire(*n.waiter, 30s, asio::experimental::deferred),
                                          timer.async_wait(asio::experimental::deferred))
      .async_wait(
          asio::experimental::wait_for_one(),
          asio::bind_executor(io, [&](std::array<std::size_t, 2>, std::error_code ec, dlock::lease l, std::error_code) {
            acquire_error = ec;
            EXPECT_FALSE(l);
          }));
  io.run();
  ASSERT_TRUE(acquire_error);
  EXPECT_EQ(*acquire_error, asio::error::operation_aborted);
}

// deferred: the operation starts when the deferred object is invoked, not before.
TEST(AsioDeferred, ADeferredAcquireStartsWhenInvoked) {
  auto backend = dlock::open("memory://");
  auto lock = backend->make_lock(unique("deferred")), other = backend->make_lock(lock->name());
  asio::io_context io;
  auto op = dlock::async_acquire(*lock, 300ms, asio::experimental::deferred);
  auto kept = other->try_acquire();
  EXPECT_TRUE(kept) << "a deferred acquire started before it was invoked";
  bool done = false;
  std::move(op)(asio::bind_executor(io, [&](std::error_code ec, dlock::lease l) {
    EXPECT_FALSE(ec);
    EXPECT_FALSE(l) << "granted beside the other holder";
    done = true;
  }));
  io.run();  // the other holder keeps the lock: the acquire times out
  EXPECT_TRUE(done);
}

// The engine itself (dlock/detail/async_waiters.hpp), with acquires it is handed as functions,
// every round-trip thread busy in a first try that does not return until the test lets it.
class AsyncEngine : public ::testing::Test {
 protected:
  struct recorded final : dlock::detail::async_completion {
    std::promise<std::error_code> result;
    void complete(std::error_code ec, dlock::lease) noexcept override { result.set_value(ec); }
  };
  static std::pair<dlock::detail::async_wait_handle, std::future<std::error_code>> start(
      const void* name, std::chrono::steady_clock::time_point deadline, dlock::detail::blocking_acquire acquire) {
    auto done = std::make_unique<recorded>();
    auto result = done->result.get_future();
    auto handle = dlock::detail::start_async_wait({name, 0}, std::move(acquire), deadline, std::move(done));
    return std::pair{handle, std::move(result)};
  }
  static dlock::lease failing(std::error_code& ec) {
    ec = std::make_error_code(std::errc::io_error);
    return dlock::lease{};
  }

  void SetUp() override {
    for (auto& name : busy_names_) {
      busy_.push_back(
          start(&name, std::chrono::steady_clock::now() + 60s, [this](auto, std::stop_token, std::error_code& ec) {
            ++blocked_;
            unblocked_.wait();
            return failing(ec);
          }).second);
    }
    for (int i = 0; i < 1000 && blocked_.load() < round_trip_threads; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(blocked_.load(), round_trip_threads) << "the first tries did not all start";
  }
  // The busy first tries return however the test ends (a failed ASSERT returns early). Then every
  // round-trip thread takes a sentinel at once, so the tasks queued before them are done, and a
  // wait ended before its first try began was never tried.
  void TearDown() override {
    unblock_busy();
    for (auto& b : busy_) EXPECT_EQ(b.get(), std::errc::io_error);
    auto all_taken = std::make_shared<std::latch>(static_cast<std::ptrdiff_t>(round_trip_threads));
    std::vector<int> sentinel_names(round_trip_threads);
    std::vector<std::future<std::error_code>> sentinels;
    for (auto& name : sentinel_names) {
      sentinels.push_back(
          start(&name, std::chrono::steady_clock::now() + 60s, [all_taken](auto, std::stop_token, std::error_code& ec) {
            all_taken->arrive_and_wait();
            return failing(ec);
          }).second);
    }
    for (auto& sentinel : sentinels)
      ASSERT_EQ(sentinel.wait_for(10s), std::future_status::ready) << "the round-trip threads did not drain";
    EXPECT_FALSE(tried_->load()) << "a wait that ended before its first try began was tried";
  }
  // An acquire that records that it ran.
  dlock::detail::blocking_acquire tracked() const {
    return [tried = tried_](auto, std::stop_token, std::error_code& ec) {
      *tried = true;
      return failing(ec);
    };
  }
  void unblock_busy() {
    if (!std::exchange(unblocked_now_, true)) unblock_.set_value();
  }

  static constexpr std::size_t round_trip_threads = dlock::detail::round_trip_threads;

 private:
  std::promise<void> unblock_;
  std::shared_future<void> unblocked_ = unblock_.get_future().share();
  bool unblocked_now_ = false;
  std::atomic<std::size_t> blocked_{0};
  std::shared_ptr<std::atomic<bool>> tried_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<int> busy_names_ = std::vector<int>(round_trip_threads);
  std::vector<std::future<std::error_code>> busy_;
};

// A wait whose first try is queued behind the busy threads is canceled at once, never tried, and
// the wait queued behind it in its line leads without waiting for a round-trip thread.
TEST_F(AsyncEngine, AFirstTryQueuedBehindBusyRoundTripThreadsIsCanceledAtOnce) {
  int name = 0;
  const auto later = std::chrono::steady_clock::now() + 60s;
  auto [head, head_result] = start(&name, later, tracked());
  auto [next, next_result] =
      start(&name, later, [](auto, std::stop_token, std::error_code& ec) { return failing(ec); });
  head.cancel();
  ASSERT_EQ(head_result.wait_for(5s), std::future_status::ready) << "the cancel waited for a round-trip thread";
  EXPECT_EQ(head_result.get(), dlock::detail::canceled_error());
  ASSERT_EQ(next_result.wait_for(5s), std::future_status::ready) << "the next in line waited for a round-trip thread";
  EXPECT_EQ(next_result.get(), std::errc::io_error);
}

// Its deadline passes while its first try is queued behind the busy threads: it times out then
// (no error: try_acquire_until's timeout), never tried, and the next in line leads. (A second, so
// that the next joins the line before it ends, even on a starved machine.)
TEST_F(AsyncEngine, AFirstTryQueuedBehindBusyRoundTripThreadsTimesOutAtItsDeadline) {
  int name = 0;
  auto [head, head_result] = start(&name, std::chrono::steady_clock::now() + 1s, tracked());
  auto [next, next_result] = start(&name, std::chrono::steady_clock::now() + 60s,
                                   [](auto, std::stop_token, std::error_code& ec) { return failing(ec); });
  ASSERT_EQ(head_result.wait_for(10s), std::future_status::ready)
      << "the deadline passed unseen while the first try waited for a round-trip thread";
  EXPECT_FALSE(head_result.get()) << "a timeout is no error";
  ASSERT_EQ(next_result.wait_for(5s), std::future_status::ready) << "the next in line waited for a round-trip thread";
  EXPECT_EQ(next_result.get(), std::errc::io_error);
}

// A burst leaves no threads behind: the round-trip threads it started leave once idle, as a line's
// thread does, so a service's thread count follows its load. (Every one is busy at the start.)
TEST_F(AsyncEngine, TheRoundTripThreadsOfABurstLeaveOnceIdle) {
  const auto during = dlock::detail::async_engine_threads();
  ASSERT_GE(during, round_trip_threads);
  unblock_busy();
  const auto give_up = std::chrono::steady_clock::now() + 15s;
  while (dlock::detail::async_engine_threads() + round_trip_threads > during &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(20ms);
  EXPECT_LE(dlock::detail::async_engine_threads() + round_trip_threads, during)
      << "the round-trip threads stayed after the burst";
}

}  // namespace
