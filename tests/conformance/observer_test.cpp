// The observer (dlock/observer.hpp) on every backend: it is told of each acquire with its outcome,
// of the waiters while one waits, and of each release with its hold time, whatever the backend's
// own wait (polling, a server queue, a watch) and its lease.
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "conformance_test.hpp"

namespace dlock::conformance {

namespace {

class recording_observer final : public observer {
 public:
  void on_acquire(const acquire_event& e) noexcept override {
    std::lock_guard guard(mutex_);
    backends_.emplace_back(e.lock.backend);
    acquires_.push_back(e.outcome);
  }
  void on_release(const release_event& e) noexcept override {
    std::lock_guard guard(mutex_);
    releases_.push_back(e.error);
    held_.push_back(e.held);
  }
  void on_waiters(const waiters_event& e) noexcept override {
    std::lock_guard guard(mutex_);
    most_waiting_ = std::max(most_waiting_, e.waiting);
    waiting_ = e.waiting;
  }

  mutable std::mutex mutex_;
  std::vector<std::string> backends_;
  std::vector<acquire_outcome> acquires_;
  std::vector<std::error_code> releases_;
  std::vector<std::chrono::nanoseconds> held_;
  std::size_t most_waiting_ = 0, waiting_ = 0;
};

}  // namespace

TEST_P(Lock, ObserverIsToldOfAcquiresWaitersAndReleases) {
  auto observed = std::make_shared<recording_observer>();
  backend_->set_observer(observed);
  const auto name = dlock::testing::unique_name("observed");
  auto mine = make(name), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(theirs->try_acquire_for(200ms));
  std::this_thread::sleep_for(10ms);
  held.release();
  backend_->set_observer(nullptr);

  std::lock_guard guard(observed->mutex_);
  ASSERT_EQ(observed->acquires_.size(), 2u);
  EXPECT_EQ(observed->acquires_[0], acquire_outcome::granted);
  EXPECT_EQ(observed->acquires_[1], acquire_outcome::timed_out);
  for (const auto& b : observed->backends_) EXPECT_EQ(b, scheme_);
  EXPECT_EQ(observed->most_waiting_, 1u) << "the wait of try_acquire_for was not counted";
  EXPECT_EQ(observed->waiting_, 0u);
  ASSERT_EQ(observed->releases_.size(), 1u);
  EXPECT_FALSE(observed->releases_[0]) << observed->releases_[0].message();
  EXPECT_GE(observed->held_[0], 10ms);
}

}  // namespace dlock::conformance
