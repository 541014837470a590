#include "memory_lock.hpp"

#include "memory_lease.hpp"

namespace dlock::memory {

memory_lock::memory_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<table> owner_table)
    : distributed_lock(name, caps, std::move(options)), table_(std::move(owner_table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_lock::make_lease(grant_ticket ticket) {
  return std::make_unique<memory_lease>(key_, options().ttl, table_, std::move(ticket));
}

std::unique_ptr<spi::lease_state> memory_lock::do_try_acquire(std::error_code& ec) noexcept {
  try {
    auto ticket = table_->try_acquire(key_, owner(), options().ttl);
    return ticket ? make_lease(std::move(*ticket)) : nullptr;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "memory lock '" + key_ + "': " + e.what());
    return nullptr;
  }
}

std::unique_ptr<spi::lease_state> memory_lock::do_acquire_until(clock::time_point deadline,
                                                                std::error_code& ec) noexcept {
  try {
    auto ticket = table_->acquire_until(key_, owner(), options().ttl, deadline);
    return ticket ? make_lease(std::move(*ticket)) : nullptr;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "memory lock '" + key_ + "': " + e.what());
    return nullptr;
  }
}

}  // namespace dlock::memory
