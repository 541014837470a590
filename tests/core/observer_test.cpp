// The observer (dlock/observer.hpp) over the memory backend: every acquire outcome, hold times,
// renewal margins, losses and waiter counts, for the mutex, both sides of the reader-writer lock and
// the semaphore.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

using namespace dlock;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// What an event said, its views copied (they live only for the call). Every member has an
// initializer: an event names only the members it sets.
struct seen {
  std::string kind{};  // "acquire", "release", "renewal", "lost", "waiters"
  std::string backend{};
  primitive_kind primitive = primitive_kind::mutex;
  std::string name{};
  acquire_outcome outcome = acquire_outcome::granted;
  std::chrono::nanoseconds duration{};  // waited, held or margin
  std::uint32_t permits = 0;
  bool renewed = false;
  int change = 0;
  std::size_t waiting = 0;
  std::error_code error{};
};

class recording_observer final : public observer {
 public:
  void on_acquire(const acquire_event& e) noexcept override {
    add(e.lock,
        {.kind = "acquire", .outcome = e.outcome, .duration = e.waited, .permits = e.permits, .error = e.error});
  }
  void on_release(const release_event& e) noexcept override {
    add(e.lock, {.kind = "release", .duration = e.held, .error = e.error});
  }
  void on_renewal(const renewal_event& e) noexcept override {
    add(e.lock, {.kind = "renewal", .duration = e.margin, .renewed = e.renewed, .error = e.error});
  }
  void on_lost(const loss_event& e) noexcept override { add(e.lock, {.kind = "lost", .error = e.reason}); }
  void on_waiters(const waiters_event& e) noexcept override {
    add(e.lock, {.kind = "waiters", .change = e.change, .waiting = e.waiting});
  }

  std::vector<seen> of(const std::string& kind) const {
    std::lock_guard guard(mutex_);
    std::vector<seen> out;
    std::copy_if(events_.begin(), events_.end(), std::back_inserter(out),
                 [&](const seen& s) { return s.kind == kind; });
    return out;
  }
  // Waits for `done()` over the events, or for `limit` (a failed wait fails the test that asked).
  template <class Done>
  bool wait_for(Done&& done, std::chrono::milliseconds limit = 10s) const {
    std::unique_lock guard(mutex_);
    return changed_.wait_for(guard, limit, [&] { return done(events_); });
  }

 private:
  // `s` with the lock's fields copied from the event's `lock`.
  void add(const observed_lock& lock, seen s) {
    s.backend = std::string(lock.backend);
    s.primitive = lock.primitive;
    s.name = std::string(lock.name);
    {
      std::lock_guard guard(mutex_);
      events_.push_back(std::move(s));
    }
    changed_.notify_all();
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<seen> events_;
};

std::string unique_namespace(const std::string& test) {
  static std::atomic<int> counter{0};
  return "memory://observer-" + test + "-" + std::to_string(counter++);
}

TEST(Observer, ReportsEachAcquireOutcome) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("outcomes"), observed);
  ASSERT_EQ(backend->observed_by(), observed);
  auto holder = backend->make_lock("orders");
  auto other = backend->make_lock("orders");

  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(other->try_acquire());          // a try that found it held
  EXPECT_FALSE(other->try_acquire_for(30ms));  // a wait that reached its deadline
  std::stop_source stop;
  stop.request_stop();
  std::error_code ec;
  EXPECT_FALSE(other->try_acquire_for(10s, stop.get_token(), ec));
  EXPECT_EQ(ec, std::errc::operation_canceled);

  const auto acquires = observed->of("acquire");
  ASSERT_EQ(acquires.size(), 4u);
  EXPECT_EQ(acquires[0].outcome, acquire_outcome::granted);
  EXPECT_EQ(acquires[1].outcome, acquire_outcome::timed_out);
  EXPECT_EQ(acquires[2].outcome, acquire_outcome::timed_out);
  EXPECT_GE(acquires[2].duration, 30ms);  // it did wait to its deadline
  EXPECT_EQ(acquires[3].outcome, acquire_outcome::cancelled);
  EXPECT_EQ(acquires[3].error, std::errc::operation_canceled);
  for (const auto& a : acquires) {
    EXPECT_EQ(a.backend, "memory");
    EXPECT_EQ(a.primitive, primitive_kind::mutex);
    EXPECT_EQ(a.name, "orders");
    EXPECT_EQ(a.permits, 1u);
  }
  EXPECT_EQ(to_string(acquire_outcome::cancelled), "cancelled");
  EXPECT_EQ(to_string(acquire_outcome::timed_out), "timed_out");
}

TEST(Observer, ReportsAnErrorOutcome) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("error"), observed);
  auto permits = backend->make_semaphore("pool", 2);
  std::error_code ec;
  EXPECT_FALSE(permits->try_acquire_for(10ms, 3, ec));  // more permits than the semaphore has
  ASSERT_TRUE(ec);
  const auto acquires = observed->of("acquire");
  ASSERT_EQ(acquires.size(), 1u);
  EXPECT_EQ(acquires[0].outcome, acquire_outcome::error);
  EXPECT_EQ(acquires[0].error, ec);
  EXPECT_EQ(acquires[0].permits, 3u);
}

TEST(Observer, ReportsHoldTimeAtEachRelease) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("hold"), observed);
  auto lock = backend->make_lock("report");
  {
    auto lease = lock->acquire();
    std::this_thread::sleep_for(50ms);
    lease.release();
  }
  { auto by_destructor = lock->acquire(); }
  const auto releases = observed->of("release");
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_GE(releases[0].duration, 50ms);
  EXPECT_FALSE(releases[0].error);
  EXPECT_FALSE(releases[1].error);
  EXPECT_TRUE(observed->of("lost").empty());
}

TEST(Observer, ReportsRenewalsWithTheirMargin) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("renew") + "?ttl=300ms", observed);
  auto lease = backend->make_lock("renewed")->acquire();
  // The watchdog renews at ttl/3: wait for two renewals.
  ASSERT_TRUE(observed->wait_for([](const std::vector<seen>& events) {
    return std::count_if(events.begin(), events.end(), [](const seen& s) { return s.kind == "renewal"; }) >= 2;
  }));
  for (const auto& r : observed->of("renewal")) {
    EXPECT_TRUE(r.renewed);
    EXPECT_FALSE(r.error);
    EXPECT_GT(r.duration, 0ms);    // it was renewed before its validity ran out...
    EXPECT_LT(r.duration, 300ms);  // ...and had less than its ttl left
  }
  lease.release();
  EXPECT_TRUE(observed->of("lost").empty());
}

TEST(Observer, ReportsALostLeaseAndItsRelease) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("lost") + "?ttl=100ms&watchdog=false", observed);
  auto lease = backend->make_lock("expires")->acquire();
  ASSERT_TRUE(observed->wait_for([](const std::vector<seen>& events) {
    return std::any_of(events.begin(), events.end(), [](const seen& s) { return s.kind == "lost"; });
  }));
  const auto lost = observed->of("lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].error, errc::lock_lost);
  EXPECT_EQ(lost[0].name, "expires");
  std::error_code ec;
  lease.release(ec);
  const auto releases = observed->of("release");
  ASSERT_EQ(releases.size(), 1u);
  EXPECT_EQ(releases[0].error, ec);
}

TEST(Observer, CountsWaitersAsTheyComeAndGo) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("waiters"), observed);
  auto holder = backend->make_lock("queue")->try_acquire();  // one attempt: never a waiter
  ASSERT_TRUE(holder);
  constexpr int waiters = 3;
  std::vector<std::jthread> threads;
  std::atomic<int> granted{0};
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&] {
      auto lock = backend->make_lock("queue");
      if (auto lease = lock->try_acquire_for(30s)) ++granted;
    });
  }
  ASSERT_TRUE(observed->wait_for([](const std::vector<seen>& events) {
    return std::any_of(events.begin(), events.end(),
                       [](const seen& s) { return s.kind == "waiters" && s.waiting == waiters; });
  }));
  holder.release();
  threads.clear();
  EXPECT_EQ(granted.load(), waiters);
  const auto changes = observed->of("waiters");
  ASSERT_EQ(changes.size(), 2u * waiters);
  int sum = 0;
  for (const auto& c : changes) sum += c.change;
  EXPECT_EQ(sum, 0);
  EXPECT_EQ(changes.back().waiting, 0u);
  EXPECT_EQ(changes.back().name, "queue");
}

TEST(Observer, NamesThePrimitiveOfEachEvent) {
  auto observed = std::make_shared<recording_observer>();
  auto backend = dlock::open(unique_namespace("kinds"), observed);
  auto rw = backend->make_rw_lock("catalog");
  { auto reader = rw->try_acquire_read(); }
  { auto writer = rw->try_acquire_write(); }
  auto permits = backend->make_semaphore("pool", 3);
  { auto two = permits->try_acquire(2); }
  const auto acquires = observed->of("acquire");
  ASSERT_EQ(acquires.size(), 3u);
  EXPECT_EQ(acquires[0].primitive, primitive_kind::read);
  EXPECT_EQ(acquires[1].primitive, primitive_kind::write);
  EXPECT_EQ(acquires[2].primitive, primitive_kind::semaphore);
  EXPECT_EQ(acquires[2].permits, 2u);
  for (const auto& a : acquires) EXPECT_EQ(a.outcome, acquire_outcome::granted);
  const auto releases = observed->of("release");
  ASSERT_EQ(releases.size(), 3u);
  EXPECT_EQ(releases[0].primitive, primitive_kind::read);
  EXPECT_EQ(releases[2].primitive, primitive_kind::semaphore);
  EXPECT_EQ(to_string(primitive_kind::write), "write");
}

TEST(Observer, ReachesLocksMadeBeforeItWasSetAndStopsWhenUnset) {
  auto backend = dlock::open(unique_namespace("late"));
  EXPECT_EQ(backend->observed_by(), nullptr);
  auto lock = backend->make_lock("early");
  { auto unobserved = lock->acquire(); }

  auto first = std::make_shared<recording_observer>();
  backend->set_observer(first);
  auto lease = lock->acquire();
  EXPECT_EQ(first->of("acquire").size(), 1u);

  // The grant's release goes to the observer that saw its acquire, so that a count of held leases
  // stays balanced when the observer is replaced.
  auto second = std::make_shared<recording_observer>();
  backend->set_observer(second);
  lease.release();
  EXPECT_EQ(first->of("release").size(), 1u);
  EXPECT_TRUE(second->of("release").empty());

  backend->set_observer(nullptr);
  { auto again = lock->acquire(); }
  EXPECT_EQ(first->of("acquire").size(), 1u);
  EXPECT_TRUE(second->of("acquire").empty());
}

}  // namespace
