#pragma once
// memory://'s reader-writer lock and semaphore: both take units of their name's pool in the
// namespace's table (memory_table.hpp), the reader-writer lock the same pool as the mutex of
// the name.
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/spi.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

class memory_rw_lock final : public rw_lock {
 public:
  memory_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<table> owner_table);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<table> table_;
  std::string key_;
};

class memory_semaphore final : public semaphore {
 public:
  memory_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                   std::shared_ptr<table> owner_table);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<table> table_;
  std::string key_;
};

}  // namespace dlock::memory
