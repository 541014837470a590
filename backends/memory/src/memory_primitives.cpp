#include "memory_primitives.hpp"

#include "memory_lease.hpp"

namespace dlock::memory {

memory_rw_lock::memory_rw_lock(std::string name, capabilities caps, lock_options options,
                               std::shared_ptr<table> owner_table)
    : rw_lock(name, caps, std::move(options)), table_(std::move(owner_table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_rw_lock::do_try_acquire(access side, std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec, [&] {
    return table_->try_acquire(key_, request::read_write(owner(), side == access::write, options().ttl), ec);
  });
}

std::unique_ptr<spi::lease_state> memory_rw_lock::do_acquire_until(access side, clock::time_point deadline,
                                                                   std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec, [&] {
    return table_->acquire_until(key_, request::read_write(owner(), side == access::write, options().ttl), deadline,
                                 ec);
  });
}

memory_semaphore::memory_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                                   std::shared_ptr<table> owner_table)
    : semaphore(name, max_count, caps, std::move(options)), table_(std::move(owner_table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_semaphore::do_try_acquire(std::uint32_t permits,
                                                                   std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec, [&] {
    return table_->try_acquire(key_, request::permits(owner(), max_count(), permits, options().ttl), ec);
  });
}

std::unique_ptr<spi::lease_state> memory_semaphore::do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                                     std::error_code& ec) noexcept {
  return lease_from(key_, options().ttl, table_, ec, [&] {
    return table_->acquire_until(key_, request::permits(owner(), max_count(), permits, options().ttl), deadline, ec);
  });
}

}  // namespace dlock::memory
