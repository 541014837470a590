#include "lease_link.hpp"

#include "dlock/lease_state.hpp"

namespace dlock::memory {

void lease_link::attach(spi::lease_state* lease) noexcept {
  std::lock_guard guard(mutex_);
  lease_ = lease;
  if (pending_lost_) lease_->mark_lost(pending_lost_);
}

void lease_link::detach() noexcept {
  std::lock_guard guard(mutex_);
  lease_ = nullptr;
}

void lease_link::notify_lost(std::error_code reason) noexcept {
  // Holding mutex_ while the lease's lost callbacks run keeps the lease alive for them (its
  // destructor detaches under the same mutex). A callback may release the lease (that takes the
  // table mutex, never this one); destroying the lease from inside its own lost callback is not
  // supported by lease_state anyway.
  std::lock_guard guard(mutex_);
  if (lease_) {
    lease_->mark_lost(reason);
  } else if (!pending_lost_) {
    pending_lost_ = reason;
  }
}

void deliver_lost_notes(lost_notes& notes) noexcept {
  for (auto& [link, reason] : notes) link->notify_lost(reason);
  notes.clear();
}

}  // namespace dlock::memory
