#include "dlock/acquire_deadline.hpp"

#include <algorithm>

namespace dlock::spi {

using std::chrono::steady_clock;

namespace {
thread_local steady_clock::time_point thread_deadline = steady_clock::time_point::max();
}

deadline_scope::deadline_scope(steady_clock::time_point deadline) noexcept : previous_(thread_deadline) {
  thread_deadline = std::min(previous_, deadline);
}
deadline_scope::~deadline_scope() { thread_deadline = previous_; }

steady_clock::time_point current_deadline() noexcept { return thread_deadline; }

steady_clock::time_point io_deadline() noexcept {
  const auto d = thread_deadline;
  if (d >= steady_clock::time_point::max() - deadline_grace) return steady_clock::time_point::max();
  return d + deadline_grace;
}

}  // namespace dlock::spi
