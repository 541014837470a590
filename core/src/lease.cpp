#include "dlock/lease.hpp"

#include <algorithm>

#include "dlock/diagnostics.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "or_throw.hpp"
#include "watchdog.hpp"

namespace dlock {

lease::lease(std::shared_ptr<spi::lease_state> state) noexcept : state_(std::move(state)) {}

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease dying(std::move(*this));  // released by its destructor, with the same reporting
    state_ = std::move(other.state_);
  }
  return *this;
}

lease::~lease() {
  if (!state_ || state_->released()) return;
  std::error_code ec;
  release(ec);
  if (ec)
    report_background_error(
        ec, "releasing lock '" + state_->name() + "' when its lease was destroyed: " + last_error_message());
}

bool lease::held() const noexcept {
  // Past valid_until the server may already have granted the lock to someone else, even if the
  // watchdog has not fired lost yet (it runs on its own thread, and a paused process resumes
  // before it does): a careful holder checking held() before a write must see false then.
  return state_ && !state_->released() && !state_->lost() && clock::now() < state_->valid_until();
}

std::string_view lease::name() const noexcept { return state_ ? std::string_view(state_->name()) : std::string_view(); }

std::optional<std::uint64_t> lease::fencing_token() const noexcept {
  return state_ ? state_->fencing_token() : std::nullopt;
}

lease::clock::time_point lease::valid_until() const noexcept {
  return state_ ? state_->valid_until() : clock::time_point::min();
}

std::chrono::milliseconds lease::remaining() const noexcept {
  if (!state_) return std::chrono::milliseconds::zero();
  const auto until = state_->valid_until();
  if (until == clock::time_point::max()) return std::chrono::milliseconds::max();
  return std::max(std::chrono::milliseconds::zero(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()));
}

std::stop_token lease::lost_token() const noexcept { return state_ ? state_->lost_token() : std::stop_token(); }

std::error_code lease::lost_reason() const noexcept { return state_ ? state_->lost_reason() : std::error_code(); }

void lease::renew() {
  if (!state_) throw error(errc::invalid_argument, "renew on an empty lease");
  renew(state_->ttl());
}

void lease::renew(std::chrono::milliseconds ttl) {
  detail::or_throw([&](std::error_code& ec) { renew(ttl, ec); });
}

void lease::renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  clear_last_error_message();
  if (!state_) {
    set_error(ec, errc::invalid_argument, "renew on an empty lease");
    return;
  }
  state_->renew(ttl, ec);
}

void lease::release() {
  detail::or_throw([&](std::error_code& ec) { release(ec); });
}

void lease::release(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!state_) return;
  state_->release(ec);
  detail::forget_lease(*state_);
}

}  // namespace dlock
