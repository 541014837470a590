#pragma once
// The acquire loop every primitive shares (distributed_lock, rw_lock, semaphore): what turns a
// backend's one attempt and its wait into the public forms. Templates over the primitive's own
// steps, so a lock's hot path pays for no indirection.
#include <chrono>
#include <memory>
#include <stop_token>
#include <string_view>
#include <system_error>

#include "dlock/acquire_stop.hpp"
#include "dlock/capabilities.hpp"
#include "dlock/lease.hpp"
#include "dlock/lease_state.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/spi.hpp"

namespace dlock::detail {

using clock = std::chrono::steady_clock;

// Attaches the watchdog a grant needs (renewal where the primitive renews and the options ask for
// it, the lost signal when validity runs out) and wraps it in a lease. A grant that could not be
// watched is given back: an unwatched grant would fail its holder silently.
lease adopt(std::unique_ptr<spi::lease_state> state, const lock_options& options, capabilities caps) noexcept;

// ec = std::errc::operation_canceled, with the message naming what was waited for ("lock 'x'").
void set_canceled(std::error_code& ec, std::string_view what, std::string_view name) noexcept;

// One attempt, then the primitive's wait until `deadline` (deadline == now: the attempt alone),
// which a stop request on `stop` ends (std::errc::operation_canceled; `what` and `name` name it in
// the message). `try_once(ec)` and `wait_until(deadline, ec)` are the backend's steps, run in a
// spi::stop_scope of `stop`; `may_try()` false answers "held" without asking (a try must not
// overtake this process's waiters); `on_grant(s)` sees every grant first. Refuses grants that
// arrive without validity left or after the stop (both given back at once), and waits out
// errc::backend_unavailable with backoff until the deadline.
template <class TryOnce, class WaitUntil, class MayTry, class OnGrant>
std::unique_ptr<spi::lease_state> acquire_within(clock::time_point deadline, const std::stop_token& stop,
                                                 const backoff_policy& poll, std::error_code& ec, std::string_view what,
                                                 std::string_view name, TryOnce&& try_once, WaitUntil&& wait_until,
                                                 MayTry&& may_try, OnGrant&& on_grant) noexcept {
  const spi::stop_scope scope(stop);
  const auto canceled = [&] {
    set_canceled(ec, what, name);
    return nullptr;
  };
  for (unsigned outage_attempt = 0;;) {
    ec.clear();
    if (spi::stop_requested()) return canceled();
    std::unique_ptr<spi::lease_state> state;
    if (clock::now() < deadline) {
      state = wait_until(deadline, ec);
    } else if (may_try()) {
      state = try_once(ec);
    }
    if (state) {
      on_grant(*state);
      // A grant that crossed the stop request on the wire belongs to a caller who gave up: given
      // back now, the next contender does not wait out its ttl. And the server may have stalled
      // while the grant was on its way: a grant whose validity is already gone is not ours to use
      // (its holder could do nothing safely under it), and handing it out would give a lease that
      // is lost a moment later. Give it back and keep trying.
      const bool stopped = spi::stop_requested();
      if (!stopped && state->valid_until() > clock::now()) return state;
      {
        const spi::unstoppable_scope giving_back;  // the release itself runs to its end
        std::error_code ignored;                   // gone or not, nobody worked under it: nothing to report
        state->release(ignored);
      }
      if (stopped) return canceled();
      if (clock::now() >= deadline) return nullptr;
      continue;
    }
    // The backend ended its wait on the stop request (as at a deadline: its waiter entry removed),
    // whatever it answered.
    if (spi::stop_requested()) return canceled();
    // A server that restarts or fails over inside the caller's wait is part of the wait: keep
    // trying with backoff, and report it unavailable only when the deadline passes.
    if (ec != make_error_code(errc::backend_unavailable)) return nullptr;
    const auto now = clock::now();
    if (now >= deadline) return nullptr;
    const auto delay = spi::backoff_delay(poll, outage_attempt++);
    if (!spi::sleep_until(deadline - now <= delay ? deadline : now + delay)) return canceled();
  }
}

// The wait of a backend that cannot wait on its server: `try_once` polled with jittered
// exponential backoff, one last attempt at the deadline. A stop request of the thread's acquire
// (spi::stop_scope) ends it without another attempt.
template <class TryOnce>
std::unique_ptr<spi::lease_state> poll_until(clock::time_point deadline, const backoff_policy& poll,
                                             std::error_code& ec, TryOnce&& try_once) noexcept {
  for (unsigned attempt = 0;; ++attempt) {
    auto state = try_once(ec);
    if (state || ec) return state;
    const auto now = clock::now();
    if (now >= deadline) return nullptr;
    const auto delay = spi::backoff_delay(poll, attempt);
    if (deadline - now <= delay) {
      // Sleeping the full delay would overshoot: sleep to the deadline and try once more.
      if (!spi::sleep_until(deadline)) return nullptr;
      return try_once(ec);
    }
    if (!spi::sleep_for(delay)) return nullptr;
  }
}

}  // namespace dlock::detail
