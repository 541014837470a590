#pragma once
// spi::lease_state: one grant of one lock, as a backend sees it. For backend authors (see spi.hpp).
//
// The public part is non-virtual and thread-safe: release and renew are serialized by a mutex
// here, so a backend's do_release/do_renew never run concurrently for the same grant, and the
// watchdog thread may renew while another thread releases. Backends implement the do_* hooks;
// the core owns the validity deadline and the lost signal.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>

namespace dlock {
class distributed_lock;
namespace detail {
class local_hold;
class observed_acquire;
class observed_grant;
}  // namespace detail
}  // namespace dlock

namespace dlock::spi {

class lease_state;

// Renews many leases of one backend together: one pipeline or one statement instead of a round
// trip each. The watchdog renews the leases that fall due at the same time, and those that name
// the same renewal_batch go to it in one call (10,000 leases renewed one by one cost a third of a
// core in round trips alone).
class renewal_batch {
 public:
  virtual ~renewal_batch() = default;
  // Extends each of `leases` (all of which named this batch) to its own ttl from now, and sets
  // `outcomes[i]` as leases[i]'s do_renew would. Called by lease_state::renew_together, never
  // for a lease released or lost before the call, and without the leases' mutexes: a lease may be
  // released while its renewal is in flight (renew_together then ignores its outcome), so
  // renew_all reads only what a lease never changes after its grant (its key, token, ttl).
  virtual void renew_all(std::span<lease_state* const> leases, std::span<std::error_code> outcomes) noexcept = 0;
};

class lease_state {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~lease_state();
  lease_state(const lease_state&) = delete;
  lease_state& operator=(const lease_state&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::chrono::milliseconds ttl() const noexcept { return ttl_; }
  virtual std::optional<std::uint64_t> fencing_token() const noexcept { return std::nullopt; }

  // Local validity: after this instant the server may already have given the lock to someone
  // else. time_point::max() for grants that do not expire on their own.
  clock::time_point valid_until() const noexcept;

  // Compare-and-delete. errc::not_owner when the grant was no longer ours; a second release is a
  // no-op. After any release (successful or not) the lease no longer renews.
  void release(std::error_code& ec) noexcept;
  bool released() const noexcept { return released_.load(); }

  // Extends the grant to ttl from now (server clock) and moves valid_until accordingly. A grant
  // that is gone sets errc::lock_lost or errc::not_owner and marks the lease lost.
  void renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept;

  // The batch this lease can be renewed with, or nullptr (renewed alone). It lives at least as
  // long as the lease.
  virtual renewal_batch* batch() const noexcept { return nullptr; }
  // renew(ttl()) for each lease, all naming `batch`, with one renew_all call: the same checks,
  // validity and lost signal as renew, outcomes[i] for leases[i] (not_owner for a lease released
  // meanwhile, which is never marked lost). Returns the leases sent (the others were released or
  // lost already).
  static std::size_t renew_together(renewal_batch& batch, std::span<lease_state* const> leases,
                                    std::span<std::error_code> outcomes) noexcept;

  // Fires lost_token() once. The first reason wins. Called by backends on session events, by
  // the watchdog when renewal fails or validity runs out. Thread-safe, never blocks on I/O.
  void mark_lost(std::error_code reason) noexcept;
  bool lost() const noexcept { return lost_source_.stop_requested(); }
  std::stop_token lost_token() const noexcept { return lost_source_.get_token(); }
  std::error_code lost_reason() const noexcept;

  // The standard validity rule: start + ttl - drift, with drift = ttl/100 + 2ms (Redlock's),
  // where `start` is taken before the request was sent.
  static clock::time_point validity_after(clock::time_point start, std::chrono::milliseconds ttl) noexcept;

 protected:
  // valid_until: use validity_after(start, ttl) for expiring grants, clock::time_point::max() otherwise.
  lease_state(std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until);

  // The backend's compare-and-delete. Never throws. Only called once, under the lease mutex.
  virtual void do_release(std::error_code& ec) noexcept = 0;
  // The backend's compare-and-extend. Default: errc::not_supported.
  virtual void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept;

  void set_valid_until(clock::time_point t) noexcept;

 private:
  friend class dlock::distributed_lock;          // attaches local_hold_
  friend class dlock::detail::observed_acquire;  // attaches the observation (observe)

  // Once, before the grant is handed out: what reports its release, renewals and loss.
  void observe(std::unique_ptr<const detail::observed_grant> observation) noexcept;
  const detail::observed_grant* observation() const noexcept { return observed_.load(std::memory_order_acquire); }

  // Both under op_mutex_, shared by renew and renew_together. Whether a renewal may be sent (not
  // for a released or lost lease: `ec` says which).
  bool renewable_locked(std::error_code& ec) const;
  // What a renewal sent at `start` gave: validity extended to `ttl` from `start`, or the lease
  // marked lost when the server said it is no longer ours.
  void record_renewal_locked(clock::time_point start, std::chrono::milliseconds ttl,
                             const std::error_code& ec) noexcept;

  std::string name_;
  std::chrono::milliseconds ttl_;
  std::atomic<clock::rep> valid_until_;
  std::atomic<bool> released_{false};
  std::mutex op_mutex_;  // serializes do_release / do_renew
  std::stop_source lost_source_;
  mutable std::mutex reason_mutex_;
  std::error_code lost_reason_;
  // Set by the core for a grant taken through a lock object of a backend: tells the waiters of this
  // process that the name was released (local_wait_queue.hpp). Ended by release or destruction.
  std::unique_ptr<detail::local_hold> local_hold_;
  // Set when the backend has an observer (dlock/observer.hpp): owned by the storage, published
  // through the atomic, as a backend's session thread may mark the grant lost while it is attached.
  std::unique_ptr<const detail::observed_grant> observed_storage_;
  std::atomic<const detail::observed_grant*> observed_{nullptr};
};

}  // namespace dlock::spi
