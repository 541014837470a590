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
  // On one server (not a cluster): the mutex and reader-writer layouts at the name's key, the fair
  // queue's waiters; force_release deletes the key and publishes the release. Semaphores refused.
  lock_info do_inspect(const std::string& name) override;
  std::vector<std::string> do_list(const std::string& prefix) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  lock_info look(const std::string& name, bool remove);
  std::shared_ptr<backend_state> state_;
};

}  // namespace dlock::redis
