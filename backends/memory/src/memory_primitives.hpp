#pragma once
// memory://'s reader-writer lock and semaphore: both take units of a counting_table pool.
#include <cstdint>
#include <memory>
#include <string>

#include "counting_table.hpp"
#include "dlock/spi.hpp"

namespace dlock::memory {

// One grant of units (a read or write hold, or a semaphore's permits).
class unit_lease final : public spi::lease_state {
 public:
  unit_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<counting_table> owner_table,
             unit_ticket ticket);
  ~unit_lease() override;

  std::optional<std::uint64_t> fencing_token() const noexcept override { return ticket_.token; }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<counting_table> table_;
  unit_ticket ticket_;
};

class memory_rw_lock final : public rw_lock {
 public:
  memory_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<counting_table> table);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<counting_table> table_;
  std::string key_;
};

class memory_semaphore final : public semaphore {
 public:
  memory_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                   std::shared_ptr<counting_table> table);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<counting_table> table_;
  std::string key_;
};

}  // namespace dlock::memory
