#pragma once
// reentrant_lock: local reentrancy for backends that are not reentrant (Curator's
// InterProcessMutex counts). Wraps one lock object and is itself a distributed_lock whose caps
// add `reentrant`. Acquiring again through the same wrapper while it holds returns a new lease
// sharing the inner grant, with a hold count; the inner grant is released when the count returns
// to zero. The owner is the wrapper object: another wrapper (or lock object) is refused.
//
// The fencing token forwards from the inner grant, and when the inner grant is lost every outer
// lease is marked lost. The inner lock's own watchdog renews the grant; an outer lease reports
// valid_until() == max() (its lost_token is what tells its holder the grant is gone), and
// renew() on an outer lease renews the inner grant.
#include <memory>
#include <mutex>

#include "dlock/detail/timed_mutex.hpp"
#include "dlock/distributed_lock.hpp"

namespace dlock {

namespace detail {
struct reentrant_slot;
}

class reentrant_lock final : public distributed_lock {
 public:
  explicit reentrant_lock(std::unique_ptr<distributed_lock> inner);
  ~reentrant_lock() override;

  distributed_lock& inner() const noexcept { return *inner_; }
  // Holds through this wrapper that are not yet released (0 when the inner grant is not held).
  unsigned hold_count() const noexcept;

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override;

 private:
  std::unique_ptr<spi::lease_state> join_current_grant() noexcept;
  std::unique_ptr<spi::lease_state> publish(lease inner_grant) noexcept;

  std::unique_ptr<distributed_lock> inner_;
  std::shared_ptr<detail::reentrant_slot> slot_;
  detail::timed_mutex acquiring_;  // one thread at a time takes the inner grant
};

}  // namespace dlock
