#pragma once
// The caller's stop request inside a backend's acquire (the forms that take a std::stop_token):
// a wait ends soon after it, wherever it sleeps.
//  * stop_scope: the core sets the acquire's token for its thread around the backend's wait, as
//    deadline_scope sets its deadline; whatever waits below it reads current_stop_token().
//  * sleep_until and wait_until: the waits of a backend, which a stop request ends at once.
//  * What a backend does on a stop is what it does at its deadline: it stops waiting, takes its
//    waiter entry off the server (a queue slot, a sequential node, a waiter row) and returns no
//    grant. The core then answers std::errc::operation_canceled, and gives back a grant that
//    arrived after the stop.
// Outside a scope the token is empty (nothing can stop the wait) and nothing changes.
#include <chrono>
#include <condition_variable>
#include <stop_token>

namespace dlock::spi {

class stop_scope {
 public:
  explicit stop_scope(std::stop_token stop) noexcept;
  ~stop_scope();
  stop_scope(const stop_scope&) = delete;
  stop_scope& operator=(const stop_scope&) = delete;

 private:
  std::stop_token previous_;
};

// What must not be cut short by the stop request of the acquire around it: the release of a grant
// that crossed the stop, a withdrawal that waits for the server's answer. The token is empty
// inside (nothing stops), the outer one again after.
class unstoppable_scope {
 public:
  unstoppable_scope() noexcept;
  ~unstoppable_scope();
  unstoppable_scope(const unstoppable_scope&) = delete;
  unstoppable_scope& operator=(const unstoppable_scope&) = delete;

 private:
  std::stop_token previous_;
};

// The stop token of the acquire this thread runs; an empty one outside a scope.
const std::stop_token& current_stop_token() noexcept;
// Whether the acquire this thread runs was asked to stop.
inline bool stop_requested() noexcept { return current_stop_token().stop_requested(); }

// How long a wait that cannot be woken by a stop request (a poll(2) on a backend's socket or
// descriptor) sleeps at most before it looks at the token again, when the token can be stopped.
inline constexpr std::chrono::milliseconds stop_poll_slice{20};

// Sleeps until `until` or this thread's acquire is asked to stop, whichever comes first. Returns
// false when it ended by a stop request.
bool sleep_until(std::chrono::steady_clock::time_point until) noexcept;
inline bool sleep_for(std::chrono::steady_clock::duration d) noexcept {
  return sleep_until(std::chrono::steady_clock::now() + d);
}

// cv.wait_until(lock, until, pred) that a stop request of this thread's acquire also ends;
// time_point::max() waits without a timeout (a wait_until on it overflows converting to the
// system clock). Returns pred() as it was when the wait ended.
template <class Lock, class Predicate>
bool wait_until(std::condition_variable_any& cv, Lock& lock, std::chrono::steady_clock::time_point until,
                Predicate pred) {
  const auto& stop = current_stop_token();
  if (until == std::chrono::steady_clock::time_point::max()) return cv.wait(lock, stop, std::move(pred));
  return cv.wait_until(lock, stop, until, std::move(pred));
}

}  // namespace dlock::spi
