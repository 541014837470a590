#pragma once
// The most of something seen at once across threads (holders inside, permits held).
#include <atomic>

namespace dlock::testing {

// Raises `high` to `now` if it is lower.
inline void raise_to(std::atomic<int>& high, int now) {
  int seen = high.load();
  while (now > seen && !high.compare_exchange_weak(seen, now)) {
  }
}

}  // namespace dlock::testing
