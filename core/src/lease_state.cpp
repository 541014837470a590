#include "dlock/lease_state.hpp"

#include <vector>

#include "dlock/error.hpp"
#include "local_wait_queue.hpp"
#include "observation.hpp"

namespace dlock::spi {

lease_state::lease_state(std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until)
    : name_(std::move(name)), ttl_(ttl), valid_until_(valid_until.time_since_epoch().count()) {}

lease_state::~lease_state() = default;

lease_state::clock::time_point lease_state::valid_until() const noexcept {
  return clock::time_point(clock::duration(valid_until_.load()));
}

void lease_state::set_valid_until(clock::time_point t) noexcept { valid_until_.store(t.time_since_epoch().count()); }

lease_state::clock::time_point lease_state::validity_after(clock::time_point start,
                                                           std::chrono::milliseconds ttl) noexcept {
  const auto drift = ttl / 100 + std::chrono::milliseconds(2);
  return start + ttl - drift;
}

void lease_state::release(std::error_code& ec) noexcept {
  ec.clear();
  std::lock_guard guard(op_mutex_);
  if (released_.exchange(true)) return;
  do_release(ec);
  if (ec == errc::not_owner) mark_lost(ec);
  if (const auto* observed = observation()) observed->released(name_, ec);
  // After the server let go (or said it was not ours): the head waiter of this process may try now.
  if (local_hold_) local_hold_->end();
}

void lease_state::renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  ec.clear();
  if (ttl <= std::chrono::milliseconds::zero()) {
    set_error(ec, errc::invalid_argument, "renewing lock '" + name_ + "': ttl must be positive");
    return;
  }
  std::lock_guard guard(op_mutex_);
  if (!renewable_locked(ec)) return;
  const auto start = clock::now();
  do_renew(ttl, ec);
  record_renewal_locked(start, ttl, ec);
}

bool lease_state::renewable_locked(std::error_code& ec) const {
  if (released_) {
    set_error(ec, errc::not_owner, "cannot renew lock '" + name_ + "': the lease was already released");
    return false;
  }
  if (lost()) {
    set_error(ec, errc::lock_lost, "cannot renew lock '" + name_ + "': the lease was already lost");
    return false;
  }
  return true;
}

void lease_state::record_renewal_locked(clock::time_point start, std::chrono::milliseconds ttl,
                                        const std::error_code& ec) noexcept {
  if (const auto* observed = observation()) {
    const auto left = valid_until();
    observed->renewed(name_, left == clock::time_point::max() ? clock::duration::max() : left - clock::now(), ec);
  }
  if (!ec) {
    if (valid_until() != clock::time_point::max()) set_valid_until(validity_after(start, ttl));
  } else if (ec == errc::not_owner || ec == errc::lock_lost) {
    mark_lost(ec);
  }
}

std::size_t lease_state::renew_together(renewal_batch& batch, std::span<lease_state* const> leases,
                                        std::span<std::error_code> outcomes) noexcept {
  try {
    // One lease's mutex at a time, never all of them across the round trip: a batch holds
    // hundreds of leases, and a release must not wait for the renewal of every other one. A
    // lease released while its renewal is in flight is told apart afterwards (released_ is set
    // under the mutex before the release's command is sent), so its outcome is ignored: a
    // renewal that found the key already deleted by that release is no loss.
    std::vector<lease_state*> sent;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < leases.size(); ++i) {
      auto& lease = *leases[i];
      outcomes[i].clear();
      std::lock_guard guard(lease.op_mutex_);
      if (lease.renewable_locked(outcomes[i])) {
        sent.push_back(&lease);
        index.push_back(i);
      }
    }
    if (sent.empty()) return 0;
    std::vector<std::error_code> sent_outcomes(sent.size());
    const auto start = clock::now();
    batch.renew_all(sent, sent_outcomes);
    for (std::size_t k = 0; k < sent.size(); ++k) {
      auto& lease = *sent[k];
      const auto& ec = sent_outcomes[k];
      std::lock_guard guard(lease.op_mutex_);
      if (lease.released_) {
        set_error(outcomes[index[k]], errc::not_owner, "lock '" + lease.name_ + "' was released while it was renewed");
        continue;
      }
      lease.record_renewal_locked(start, lease.ttl_, ec);
      outcomes[index[k]] = ec;
    }
    return sent.size();
  } catch (...) {
    // Out of memory: nothing was sent; each lease is renewed alone at its next turn.
    for (auto& ec : outcomes) ec = make_error_code(errc::backend_unavailable);
    return 0;
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
  if (const auto* observed = observation()) observed->lost(name_, lost_reason());
}

void lease_state::observe(std::unique_ptr<const detail::observed_grant> observation) noexcept {
  if (observed_storage_) return;
  observed_storage_ = std::move(observation);
  observed_.store(observed_storage_.get(), std::memory_order_release);
}

std::error_code lease_state::lost_reason() const noexcept {
  std::lock_guard guard(reason_mutex_);
  return lost_reason_;
}

}  // namespace dlock::spi
