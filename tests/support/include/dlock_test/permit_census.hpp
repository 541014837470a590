// The holders of a semaphore's permits, counted in one process (or in shared memory by forked
// children: its atomics are lock-free), to show both promises of a semaphore of n: never more than
// n held at once, and n held at once.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "dlock_test/high_water.hpp"

namespace dlock::testing {

class permit_census {
 public:
  explicit permit_census(int permits) : permits_(permits) {}

  // A holder calls this right after its grant and keeps its permit for `hold`; while n have never
  // been held at once it keeps it longer (at most `bound`), so that reaching n depends on the
  // semaphore granting its free permits, not on how the threads happened to be scheduled.
  void hold(std::chrono::milliseconds hold, std::chrono::milliseconds bound = std::chrono::seconds(10)) {
    const int now = holding_.fetch_add(1) + 1;
    if (now > permits_) over_.fetch_add(1);
    raise_to(most_, now);
    std::this_thread::sleep_for(hold);
    const auto until = std::chrono::steady_clock::now() + bound;
    while (most_.load() < permits_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    holding_.fetch_sub(1);
  }

  // How many grants found more than n held, counting themselves.
  int over() const { return over_.load(); }
  // The most held at once.
  int most() const { return most_.load(); }

 private:
  int permits_;
  std::atomic<int> holding_{0}, most_{0}, over_{0};
};

}  // namespace dlock::testing
