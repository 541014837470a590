#pragma once
// One named memory:// mutex: the writer of its name's pool (memory_table.hpp) that its owner may
// re-enter. Blocking: waiters queue in the table and sleep until handed the lock.
#include <memory>
#include <span>
#include <vector>

#include "dlock/spi.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

class memory_lock final : public distributed_lock {
 public:
  memory_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<table> owner_table);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override;
  // The whole set under one hold of the table's mutex (atomic_set).
  std::vector<std::unique_ptr<spi::lease_state>> do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                    std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<table> table_;
  std::string key_;  // the name, kept as a std::string for the table's lookups
};

}  // namespace dlock::memory
