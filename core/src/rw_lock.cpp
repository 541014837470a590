#include "dlock/rw_lock.hpp"

#include "acquire_loop.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "observation.hpp"
#include "or_throw.hpp"

namespace dlock {

std::string_view to_string(access a) noexcept { return a == access::read ? "read" : "write"; }

rw_lock::rw_lock(std::string name, capabilities caps, lock_options options)
    : name_(std::move(name)), caps_(caps), options_(std::move(options)) {}

rw_lock::~rw_lock() = default;

lease rw_lock::try_acquire(access side) {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire(side, ec); });
}

lease rw_lock::try_acquire(access side, std::error_code& ec) noexcept {
  return try_acquire_until(side, clock::now(), std::stop_token{}, ec);
}

lease rw_lock::try_acquire_until(access side, clock::time_point deadline) {
  return try_acquire_until(side, deadline, std::stop_token{});
}

lease rw_lock::try_acquire_until(access side, clock::time_point deadline, std::error_code& ec) noexcept {
  return try_acquire_until(side, deadline, std::stop_token{}, ec);
}

lease rw_lock::try_acquire_until(access side, clock::time_point deadline, std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire_until(side, deadline, std::move(stop), ec); });
}

lease rw_lock::try_acquire_until(access side, clock::time_point deadline, std::stop_token stop,
                                 std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  detail::observed_acquire observed(observation_, side == access::read ? primitive_kind::read : primitive_kind::write,
                                    name_, deadline);
  auto state = detail::acquire_within(
      deadline, stop, options_.poll, ec, side == access::read ? "read lock" : "write lock", name_,
      [&](std::error_code& e) { return do_try_acquire(side, e); },
      [&](clock::time_point d, std::error_code& e) { return do_acquire_until(side, d, e); }, [] { return true; },
      [](spi::lease_state&) {});
  observed.attach(state.get());
  auto granted = detail::adopt(std::move(state), options_, caps_);
  observed.finish(static_cast<bool>(granted), ec);
  return granted;
}

lease rw_lock::acquire(access side) { return acquire(side, std::stop_token{}); }

lease rw_lock::acquire(access side, std::error_code& ec) noexcept { return acquire(side, std::stop_token{}, ec); }

lease rw_lock::acquire(access side, std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return acquire(side, std::move(stop), ec); });
}

lease rw_lock::acquire(access side, std::stop_token stop, std::error_code& ec) noexcept {
  auto l = try_acquire_until(side, clock::time_point::max(), std::move(stop), ec);
  if (!l && !ec)
    set_error(ec, errc::timeout, std::string(to_string(side)) + " lock '" + name_ + "': the backend gave up waiting");
  return l;
}

std::unique_ptr<spi::lease_state> rw_lock::do_acquire_until(access side, clock::time_point deadline,
                                                            std::error_code& ec) noexcept {
  return detail::poll_until(deadline, options_.poll, ec, [&](std::error_code& e) { return do_try_acquire(side, e); });
}

}  // namespace dlock
