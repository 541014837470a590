#include "dlock/acquire_stop.hpp"

#include <mutex>
#include <thread>
#include <utility>

namespace dlock::spi {

using std::chrono::steady_clock;

namespace {
thread_local std::stop_token thread_stop;
}

stop_scope::stop_scope(std::stop_token stop) noexcept : previous_(std::move(thread_stop)) {
  // A nested acquire (a backend's acquire inside another's) keeps the outer token when it has
  // none of its own: stopping the outer one must end the inner wait too.
  thread_stop = stop.stop_possible() ? std::move(stop) : previous_;
}

stop_scope::~stop_scope() { thread_stop = std::move(previous_); }

unstoppable_scope::unstoppable_scope() noexcept : previous_(std::exchange(thread_stop, std::stop_token{})) {}

unstoppable_scope::~unstoppable_scope() { thread_stop = std::move(previous_); }

const std::stop_token& current_stop_token() noexcept { return thread_stop; }

bool sleep_until(steady_clock::time_point until) noexcept {
  const auto& stop = thread_stop;
  if (!stop.stop_possible()) {
    std::this_thread::sleep_until(until);
    return true;
  }
  std::mutex mutex;
  std::condition_variable_any woken;
  std::unique_lock lock(mutex);
  // Never true: it ends by the time or by the stop request, which the token then shows.
  (void)wait_until(woken, lock, until, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace dlock::spi
