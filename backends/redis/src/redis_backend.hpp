#pragma once
// redis:// (SET NX PX, redis-py layout), redis+reentrant:// (Redisson RLock layout) and
// redis+fair:// (Redisson RFairLock layout), and the same three through Redis Sentinel and on Redis
// Cluster: the backend, which opens the connections and makes the locks.
#include <cstdint>
#include <memory>
#include <string>

#include "backend_state.hpp"
#include "dlock/spi.hpp"
#include "redis_settings.hpp"

namespace dlock::redis {

class redis_backend final : public backend {
 public:
  redis_backend(const uri& u, const lock_options& defaults, mode m);
  const std::shared_ptr<backend_state>& state() const noexcept { return state_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  // Redisson's RReadWriteLock and RPermitExpirableSemaphore layouts, the same on all three schemes.
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;

 private:
  std::shared_ptr<backend_state> state_;
};

}  // namespace dlock::redis
