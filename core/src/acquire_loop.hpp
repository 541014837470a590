#pragma once
// The acquire loop every primitive shares (distributed_lock, rw_lock, semaphore): what turns a
// backend's one attempt and its wait into the public forms. Templates over the primitive's own
// steps, so a lock's hot path pays for no indirection.
#include <chrono>
#include <memory>
#include <system_error>
#include <thread>

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

// One attempt, then the primitive's wait until `deadline` (deadline == now: the attempt alone).
// `try_once(ec)` and `wait_until(deadline, ec)` are the backend's steps; `may_try()` false
// answers "held" without asking (a try must not overtake this process's waiters); `on_grant(s)`
// sees every grant first. Refuses grants that arrive without validity left, and waits out
// errc::backend_unavailable with backoff until the deadline.
template <class TryOnce, class WaitUntil, class MayTry, class OnGrant>
std::unique_ptr<spi::lease_state> acquire_within(clock::time_point deadline, const backoff_policy& poll,
                                                 std::error_code& ec, TryOnce&& try_once, WaitUntil&& wait_until,
                                                 MayTry&& may_try, OnGrant&& on_grant) noexcept {
  for (unsigned outage_attempt = 0;;) {
    ec.clear();
    std::unique_ptr<spi::lease_state> state;
    if (clock::now() < deadline) {
      state = wait_until(deadline, ec);
    } else if (may_try()) {
      state = try_once(ec);
    }
    if (state) {
      on_grant(*state);
      // The server may have stalled while the grant was on its way: a grant whose validity is
      // already gone is not ours to use (its holder could do nothing safely under it), and handing
      // it out would give a lease that is lost a moment later. Give it back and keep trying.
      if (state->valid_until() > clock::now()) return state;
      std::error_code ignored;  // gone or not, nobody worked under it: nothing to report
      state->release(ignored);
      if (clock::now() >= deadline) return nullptr;
      continue;
    }
    // A server that restarts or fails over inside the caller's wait is part of the wait: keep
    // trying with backoff, and report it unavailable only when the deadline passes.
    if (ec != make_error_code(errc::backend_unavailable)) return nullptr;
    const auto now = clock::now();
    if (now >= deadline) return nullptr;
    const auto delay = spi::backoff_delay(poll, outage_attempt++);
    if (deadline - now <= delay) {
      std::this_thread::sleep_until(deadline);
    } else {
      std::this_thread::sleep_for(delay);
    }
  }
}

// The wait of a backend that cannot wait on its server: `try_once` polled with jittered
// exponential backoff, one last attempt at the deadline.
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
      std::this_thread::sleep_until(deadline);
      return try_once(ec);
    }
    std::this_thread::sleep_for(delay);
  }
}

}  // namespace dlock::detail
