#include "memory_lock.hpp"

#include "memory_lease.hpp"

namespace dlock::memory {

memory_lock::memory_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<table> owner_table)
    : distributed_lock(name, caps, std::move(options)), table_(std::move(owner_table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_lock::do_try_acquire(std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec,
                    [&] { return table_->try_acquire(key_, request::mutex(owner(), options().ttl), ec); });
}

std::unique_ptr<spi::lease_state> memory_lock::do_acquire_until(clock::time_point deadline,
                                                                std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec,
                    [&] { return table_->acquire_until(key_, request::mutex(owner(), options().ttl), deadline, ec); });
}

}  // namespace dlock::memory
