#include "dlock/lease_state.hpp"

#include "dlock/error.hpp"

namespace dlock::spi {

lease_state::lease_state(std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until)
    : name_(std::move(name)), ttl_(ttl), valid_until_(valid_until.time_since_epoch().count()) {}

lease_state::~lease_state() = default;

lease_state::clock::time_point lease_state::valid_until() const noexcept {
  return clock::time_point(clock::duration(valid_until_.load()));
}

void lease_state::set_valid_until(clock::time_point t) noexcept { valid_until_.store(t.time_since_epoch().count()); }

lease_state::clock::time_point lease_state::validity_after(clock::time_point start, std::chrono::milliseconds ttl) noexcept {
  const auto drift = ttl / 100 + std::chrono::milliseconds(2);
  return start + ttl - drift;
}

void lease_state::release(std::error_code& ec) noexcept {
  ec.clear();
  std::lock_guard guard(op_mutex_);
  if (released_.exchange(true)) return;
  do_release(ec);
  if (ec == errc::not_owner) mark_lost(ec);
}

void lease_state::renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  ec.clear();
  if (ttl <= std::chrono::milliseconds::zero()) {
    set_error(ec, errc::invalid_argument, "renewing lock '" + name_ + "': ttl must be positive");
    return;
  }
  std::lock_guard guard(op_mutex_);
  if (released_) {
    set_error(ec, errc::not_owner, "cannot renew lock '" + name_ + "': the lease was already released");
    return;
  }
  if (lost()) {
    set_error(ec, errc::lock_lost, "cannot renew lock '" + name_ + "': the lease was already lost");
    return;
  }
  const auto start = clock::now();
  do_renew(ttl, ec);
  if (!ec) {
    if (valid_until() != clock::time_point::max()) set_valid_until(validity_after(start, ttl));
  } else if (ec == errc::not_owner || ec == errc::lock_lost) {
    mark_lost(ec);
  }
}

void lease_state::do_renew(std::chrono::milliseconds, std::error_code& ec) noexcept {
  set_error(ec, errc::not_supported, "lock '" + name_ + "': this backend cannot renew a lease");
}

void lease_state::mark_lost(std::error_code reason) noexcept {
  {
    std::lock_guard guard(reason_mutex_);
    if (lost_reason_) return;
    lost_reason_ = reason ? reason : make_error_code(errc::lock_lost);
  }
  lost_source_.request_stop();
}

std::error_code lease_state::lost_reason() const noexcept {
  std::lock_guard guard(reason_mutex_);
  return lost_reason_;
}

}  // namespace dlock::spi
