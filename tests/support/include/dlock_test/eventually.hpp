#pragma once
// Waiting in a test for something another session or process makes true (a queued writer shows in
// the server's lock table, a child holds): polled, with a generous bound that only prevents a
// hang. Never a timing assertion.
#include <chrono>
#include <thread>

namespace dlock::testing {

// Whether `p()` became true within `bound` (checked every 20 ms, and once more at the end).
template <class Predicate>
bool eventually(Predicate p, std::chrono::milliseconds bound = std::chrono::seconds{15}) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  return p();
}

}  // namespace dlock::testing
