#pragma once
// The process-wide lease watchdog: renews renewable leases every period (ttl/3 by default) and
// fires the lost signal when a lease's local validity deadline passes without a successful
// renewal. Two threads, started on first use: a timer that never does I/O (so a renewal stuck on
// a slow server cannot delay another lease's lost signal) and a renewal thread that runs the renewals.
#include <chrono>
#include <memory>
#include <optional>

#include "dlock/lease_state.hpp"

namespace dlock::detail {

void watch_lease(const std::shared_ptr<spi::lease_state>& state, std::optional<std::chrono::milliseconds> renew_every);
// The lease was released: its timers go now (no-op for a lease that is not watched).
void forget_lease(const spi::lease_state& state);

}  // namespace dlock::detail
