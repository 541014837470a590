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

std::vector<std::unique_ptr<spi::lease_state>> memory_lock::do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                               std::error_code& ec) noexcept {
  std::vector<std::unique_ptr<spi::lease_state>> granted;
  try {
    std::vector<const std::string*> names;
    for (auto* l : set) {
      const auto* m = dynamic_cast<const memory_lock*>(l);
      if (m == nullptr || m->table_ != table_ || m->options().ttl != options().ttl || m->owner() != owner()) {
        ec = make_error_code(errc::not_supported);
        return granted;
      }
      names.push_back(&m->key_);
    }
    auto tickets = table_->try_acquire_all(names, request::mutex(owner(), options().ttl), ec);
    if (!tickets) return granted;
    for (std::size_t i = 0; i < names.size(); ++i)
      granted.push_back(std::make_unique<memory_lease>(*names[i], options().ttl, table_, std::move((*tickets)[i])));
  } catch (const std::exception& e) {
    // Out of memory while the tickets were turned into leases: dropping them gives back nothing, so
    // the names stay held until their ttl. Not worth a partial undo for a failed allocation.
    set_error(ec, errc::backend_error, std::string("memory: a set of locks: ") + e.what());
    granted.clear();
  }
  return granted;
}

}  // namespace dlock::memory
