#include "observation.hpp"

#include <utility>

#include "dlock/lease_state.hpp"

namespace dlock {

std::string_view to_string(primitive_kind kind) noexcept {
  switch (kind) {
    case primitive_kind::mutex: return "mutex";
    case primitive_kind::read: return "read";
    case primitive_kind::write: return "write";
    case primitive_kind::semaphore: return "semaphore";
  }
  return "mutex";
}

std::string_view to_string(acquire_outcome outcome) noexcept {
  switch (outcome) {
    case acquire_outcome::granted: return "granted";
    case acquire_outcome::timed_out: return "timed_out";
    case acquire_outcome::cancelled: return "cancelled";
    case acquire_outcome::error: return "error";
  }
  return "error";
}

void observer::on_acquire(const acquire_event&) noexcept {}
void observer::on_release(const release_event&) noexcept {}
void observer::on_renewal(const renewal_event&) noexcept {}
void observer::on_lost(const loss_event&) noexcept {}
void observer::on_waiters(const waiters_event&) noexcept {}

}  // namespace dlock

namespace dlock::detail {

observation_point::observation_point(std::string backend_label) : backend_(std::move(backend_label)) {}

void observation_point::set(std::shared_ptr<observer> target) {
  std::lock_guard guard(mutex_);
  observed_.store(target != nullptr, std::memory_order_relaxed);
  observer_ = std::move(target);
}

std::shared_ptr<observer> observation_point::current() const {
  if (!observed()) return nullptr;
  std::lock_guard guard(mutex_);
  return observer_;
}

std::size_t observation_point::change_waiting(primitive_kind kind, int change) noexcept {
  auto& count = waiting_[static_cast<std::size_t>(kind)];
  return change > 0 ? count.fetch_add(1) + 1 : count.fetch_sub(1) - 1;
}

observed_grant::observed_grant(std::shared_ptr<observer> target, std::shared_ptr<const observation_point> point,
                               primitive_kind kind, clock::time_point granted_at) noexcept
    : target_(std::move(target)), point_(std::move(point)), kind_(kind), granted_at_(granted_at) {}

observed_lock observed_grant::lock(std::string_view name) const noexcept { return {point_->backend(), kind_, name}; }

void observed_grant::released(std::string_view name, const std::error_code& ec) const noexcept {
  target_->on_release({lock(name), clock::now() - granted_at_, ec});
}

void observed_grant::renewed(std::string_view name, clock::duration margin, const std::error_code& ec) const noexcept {
  target_->on_renewal({lock(name), !ec, margin < clock::duration::zero() ? clock::duration::zero() : margin, ec});
}

void observed_grant::lost(std::string_view name, const std::error_code& reason) const noexcept {
  target_->on_lost({lock(name), reason});
}

observed_acquire::observed_acquire(const std::shared_ptr<observation_point>& point, primitive_kind kind,
                                   std::string_view name, clock::time_point deadline, std::uint32_t permits) noexcept
    : kind_(kind), name_(name), permits_(permits) {
  if (!point || !point->observed()) return;
  try {
    target_ = point->current();
  } catch (...) {
    return;  // the observer's mutex failed: this call goes unobserved
  }
  if (!target_) return;
  point_ = point;
  start_ = clock::now();
  if (deadline > start_) {
    waiting_ = true;
    target_->on_waiters({{point_->backend(), kind_, name_}, +1, point_->change_waiting(kind_, +1)});
  }
}

observed_acquire::~observed_acquire() { stop_waiting(); }

void observed_acquire::stop_waiting() noexcept {
  if (!waiting_) return;
  waiting_ = false;
  target_->on_waiters({{point_->backend(), kind_, name_}, -1, point_->change_waiting(kind_, -1)});
}

void observed_acquire::attach(spi::lease_state* grant) noexcept {
  if (!target_ || !grant) return;
  try {
    grant->observe(std::make_unique<observed_grant>(target_, point_, kind_, clock::now()));
  } catch (...) {
    // Out of memory: the grant goes unobserved; the lock itself is unaffected.
  }
}

void observed_acquire::finish(bool granted, const std::error_code& ec) noexcept {
  if (!target_) return;
  stop_waiting();
  acquire_outcome outcome = acquire_outcome::timed_out;
  if (granted) {
    outcome = acquire_outcome::granted;
  } else if (ec == std::errc::operation_canceled) {
    outcome = acquire_outcome::cancelled;
  } else if (ec) {
    outcome = acquire_outcome::error;
  }
  target_->on_acquire({{point_->backend(), kind_, name_}, outcome, clock::now() - start_, permits_, ec});
}

}  // namespace dlock::detail
