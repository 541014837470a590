#include "dlock/semaphore.hpp"

#include "acquire_loop.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "observation.hpp"
#include "or_throw.hpp"

namespace dlock {

semaphore::semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options)
    : name_(std::move(name)), max_count_(max_count), caps_(caps), options_(std::move(options)) {}

semaphore::~semaphore() = default;

bool semaphore::check_permits(std::uint32_t permits, std::error_code& ec) const noexcept {
  if (permits >= 1 && permits <= max_count_) return true;
  set_error(ec, errc::invalid_argument,
            "semaphore '" + name_ + "' has " + std::to_string(max_count_) + " permits; an acquire takes 1 to " +
                std::to_string(max_count_) + ", got " + std::to_string(permits));
  return false;
}

lease semaphore::try_acquire(std::uint32_t permits) {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire(permits, ec); });
}

lease semaphore::try_acquire(std::uint32_t permits, std::error_code& ec) noexcept {
  return try_acquire_until(clock::now(), std::stop_token{}, permits, ec);
}

lease semaphore::try_acquire_until(clock::time_point deadline, std::uint32_t permits) {
  return try_acquire_until(deadline, std::stop_token{}, permits);
}

lease semaphore::try_acquire_until(clock::time_point deadline, std::uint32_t permits, std::error_code& ec) noexcept {
  return try_acquire_until(deadline, std::stop_token{}, permits, ec);
}

lease semaphore::try_acquire_until(clock::time_point deadline, std::stop_token stop, std::uint32_t permits) {
  return detail::or_throw(
      [&](std::error_code& ec) { return try_acquire_until(deadline, std::move(stop), permits, ec); });
}

lease semaphore::try_acquire_until(clock::time_point deadline, std::stop_token stop, std::uint32_t permits,
                                   std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  detail::observed_acquire observed(observation_, primitive_kind::semaphore, name_, deadline, permits);
  if (!check_permits(permits, ec)) {
    observed.finish(false, ec);
    return {};
  }
  auto state = detail::acquire_within(
      deadline, stop, options_.poll, ec, "semaphore", name_,
      [&](std::error_code& e) { return do_try_acquire(permits, e); },
      [&](clock::time_point d, std::error_code& e) { return do_acquire_until(permits, d, e); }, [] { return true; },
      [](spi::lease_state&) {});
  observed.attach(state.get());
  auto granted = detail::adopt(std::move(state), options_, caps_);
  observed.finish(static_cast<bool>(granted), ec);
  return granted;
}

lease semaphore::acquire(std::uint32_t permits) { return acquire(std::stop_token{}, permits); }

lease semaphore::acquire(std::uint32_t permits, std::error_code& ec) noexcept {
  return acquire(std::stop_token{}, permits, ec);
}

lease semaphore::acquire(std::stop_token stop, std::uint32_t permits) {
  return detail::or_throw([&](std::error_code& ec) { return acquire(std::move(stop), permits, ec); });
}

lease semaphore::acquire(std::stop_token stop, std::uint32_t permits, std::error_code& ec) noexcept {
  auto l = try_acquire_until(clock::time_point::max(), std::move(stop), permits, ec);
  if (!l && !ec) set_error(ec, errc::timeout, "semaphore '" + name_ + "': the backend gave up waiting");
  return l;
}

std::unique_ptr<spi::lease_state> semaphore::do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                              std::error_code& ec) noexcept {
  return detail::poll_until(deadline, options_.poll, ec,
                            [&](std::error_code& e) { return do_try_acquire(permits, e); });
}

}  // namespace dlock
