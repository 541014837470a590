#pragma once
// How memory://'s table (memory_table.*) tells a lease it is lost: each hold of a grant keeps a
// lease_link, and a loss found under the table's mutex is collected as a lost note and delivered after the mutex is let
// go (a lost callback may release, which takes the table's mutex again).
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock::spi {
class lease_state;
}
namespace dlock::memory {

// The tie between one grant hold and the lease object that represents it. The table keeps it to
// mark the lease lost (expiry taken over, test-only break) without owning the lease; the lease
// attaches itself once it exists and detaches in its destructor. A loss that happens before the
// lease attaches (a hand-off broken before the waiting thread woke up) is remembered and applied
// at attach time.
class lease_link {
 public:
  void attach(spi::lease_state* lease) noexcept;
  void detach() noexcept;
  void notify_lost(std::error_code reason) noexcept;

 private:
  std::mutex mutex_;
  spi::lease_state* lease_ = nullptr;
  std::error_code pending_lost_;
};

// Losses found under a table's mutex, to deliver once it is released.
using lost_notes = std::vector<std::pair<std::shared_ptr<lease_link>, std::error_code>>;

// Marks each noted lease lost (or remembers it for a lease not attached yet), then empties `notes`.
void deliver_lost_notes(lost_notes& notes) noexcept;

}  // namespace dlock::memory
