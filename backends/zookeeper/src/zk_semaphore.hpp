#pragma once
// A semaphore of zookeeper://: Curator InterProcessSemaphoreV2's layout under the name's folder
// <path> (the folder a mutex of the same name would use):
//   <path>/locks/_c_<uuid>-lock-<seq>     its internal mutex (a Curator InterProcessMutex)
//   <path>/leases/_c_<uuid>-lease-<seq>   one ephemeral sequential node per permit held
// Acquire: take the internal mutex, create our lease nodes (k of them for k permits, under one
// hold), then read leases/ with a watch until it has at most max_count children; release the
// mutex. A waiter holds the mutex while it waits, so waiters are served in the mutex's order.
// try_acquire skips the mutex (zk_semaphore.cpp says why that is safe). Release: delete our lease
// nodes (no mutex).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "node_creation.hpp"
#include "zk_lock.hpp"

namespace dlock::zookeeper {

class zk_semaphore final : public semaphore {
 public:
  zk_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
               std::shared_ptr<connection> conn, node_settings settings);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  // Take the internal mutex (waiting until the deadline), then take_leases, then release the mutex.
  std::unique_ptr<spi::lease_state> acquire_in_mutex(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept;
  // Create `permits` lease nodes and, if `wait`, wait until they fit (under the internal mutex);
  // else take them only if they fit at once.
  std::unique_ptr<spi::lease_state> take_leases(std::uint32_t permits, clock::time_point deadline, bool wait,
                                                std::error_code& ec);

  std::shared_ptr<connection> conn_;
  node_settings settings_;
  std::string folder_, locks_, leases_;  // "<path>", "<path>/locks", "<path>/leases"
};

}  // namespace dlock::zookeeper
