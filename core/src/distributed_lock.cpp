#include "dlock/distributed_lock.hpp"

#include <thread>

#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "dlock/spi.hpp"
#include "watchdog.hpp"

namespace dlock {

distributed_lock::distributed_lock(std::string name, capabilities caps, lock_options options)
    : name_(std::move(name)), caps_(caps), options_(std::move(options)) {}

distributed_lock::~distributed_lock() = default;

lease distributed_lock::adopt(std::unique_ptr<spi::lease_state> state) noexcept {
  if (!state) return {};
  std::shared_ptr<spi::lease_state> shared(std::move(state));
  std::optional<std::chrono::milliseconds> renew_every;
  if (options_.watchdog && caps_.has(capability::renewable))
    renew_every = options_.renew_every.value_or(options_.ttl / 3);
  if (renew_every || shared->valid_until() != clock::time_point::max()) {
    try {
      detail::watch_lease(shared, renew_every);
    } catch (...) {
      // No thread could be started: the lease is still valid, but nobody would renew it or tell
      // its holder it ran out. Refuse it rather than hand out an unwatched grant.
      std::error_code ignored;
      shared->release(ignored);
      return {};
    }
  }
  return lease(std::move(shared));
}

lease distributed_lock::try_acquire() {
  std::error_code ec;
  auto l = try_acquire(ec);
  throw_if(ec);
  return l;
}

lease distributed_lock::try_acquire(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  return adopt(acquire_within(clock::now(), ec));
}

lease distributed_lock::try_acquire_until(clock::time_point deadline) {
  std::error_code ec;
  auto l = try_acquire_until(deadline, ec);
  throw_if(ec);
  return l;
}

lease distributed_lock::try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  return adopt(acquire_within(deadline, ec));
}

lease distributed_lock::acquire() {
  std::error_code ec;
  auto l = acquire(ec);
  throw_if(ec);
  return l;
}

lease distributed_lock::acquire(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  auto l = adopt(acquire_within(clock::time_point::max(), ec));
  if (!l && !ec) set_error(ec, errc::timeout, "lock '" + name_ + "': the backend gave up waiting");
  return l;
}

std::unique_ptr<spi::lease_state> distributed_lock::acquire_within(clock::time_point deadline,
                                                                   std::error_code& ec) noexcept {
  for (unsigned outage_attempt = 0;;) {
    ec.clear();
    auto state = clock::now() >= deadline ? do_try_acquire(ec) : do_acquire_until(deadline, ec);
    if (state) {
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
    const auto delay = spi::backoff_delay(options_.poll, outage_attempt++);
    if (deadline - now <= delay) {
      std::this_thread::sleep_until(deadline);
    } else {
      std::this_thread::sleep_for(delay);
    }
  }
}

std::unique_ptr<spi::lease_state> distributed_lock::do_acquire_until(clock::time_point deadline,
                                                                     std::error_code& ec) noexcept {
  for (unsigned attempt = 0;; ++attempt) {
    auto state = do_try_acquire(ec);
    if (state || ec) return state;
    const auto now = clock::now();
    if (now >= deadline) return nullptr;
    const auto delay = spi::backoff_delay(options_.poll, attempt);
    if (deadline - now <= delay) {
      // Sleeping the full delay would overshoot: sleep to the deadline and try once more.
      std::this_thread::sleep_until(deadline);
      return do_try_acquire(ec);
    }
    std::this_thread::sleep_for(delay);
  }
}

}  // namespace dlock
