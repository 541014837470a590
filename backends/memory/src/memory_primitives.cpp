#include "memory_primitives.hpp"

namespace dlock::memory {

unit_lease::unit_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<counting_table> owner_table,
                       unit_ticket ticket)
    : lease_state(std::move(name), ttl, validity_after(ticket.granted_at, ttl)),
      table_(std::move(owner_table)),
      ticket_(std::move(ticket)) {
  ticket_.link->attach(this);
}

unit_lease::~unit_lease() { ticket_.link->detach(); }

void unit_lease::do_release(std::error_code& ec) noexcept {
  try {
    table_->release(name(), ticket_.id, ec);
  } catch (const std::exception& e) {  // allocation failure while formatting a message
    set_error(ec, errc::backend_error, e.what());
  }
}

void unit_lease::do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  try {
    table_->renew(name(), ticket_.id, ttl, ec);
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
}

namespace {
// One table call, as a lease: nullptr when not granted, errors mapped to ec.
template <class Call>
std::unique_ptr<spi::lease_state> granted(const std::string& key, std::chrono::milliseconds ttl,
                                          const std::shared_ptr<counting_table>& table, std::error_code& ec,
                                          Call&& call) noexcept {
  try {
    auto ticket = call();
    return ticket ? std::make_unique<unit_lease>(key, ttl, table, std::move(*ticket)) : nullptr;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "memory '" + key + "': " + e.what());
    return nullptr;
  }
}

std::uint64_t units_of(access side) { return side == access::read ? 1 : rw_capacity; }
}  // namespace

memory_rw_lock::memory_rw_lock(std::string name, capabilities caps, lock_options options,
                               std::shared_ptr<counting_table> table)
    : rw_lock(name, caps, std::move(options)), table_(std::move(table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_rw_lock::do_try_acquire(access side, std::error_code& ec) noexcept {
  return granted(key_, options().ttl, table_, ec,
                 [&] { return table_->try_acquire(key_, rw_capacity, units_of(side), options().ttl, ec); });
}

std::unique_ptr<spi::lease_state> memory_rw_lock::do_acquire_until(access side, clock::time_point deadline,
                                                                   std::error_code& ec) noexcept {
  return granted(key_, options().ttl, table_, ec, [&] {
    return table_->acquire_until(key_, rw_capacity, units_of(side), options().ttl, deadline, ec);
  });
}

memory_semaphore::memory_semaphore(std::string name, std::uint32_t max_count, capabilities caps,
                                   lock_options options, std::shared_ptr<counting_table> table)
    : semaphore(name, max_count, caps, std::move(options)), table_(std::move(table)), key_(std::move(name)) {}

std::unique_ptr<spi::lease_state> memory_semaphore::do_try_acquire(std::uint32_t permits,
                                                                   std::error_code& ec) noexcept {
  return granted(key_, options().ttl, table_, ec,
                 [&] { return table_->try_acquire(key_, max_count(), permits, options().ttl, ec); });
}

std::unique_ptr<spi::lease_state> memory_semaphore::do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                                     std::error_code& ec) noexcept {
  return granted(key_, options().ttl, table_, ec,
                 [&] { return table_->acquire_until(key_, max_count(), permits, options().ttl, deadline, ec); });
}

}  // namespace dlock::memory
