#pragma once
// memcached:// backend: the backend (owns the pool), the lock (one `add` per attempt; the core
// polls with jittered backoff, memcached cannot queue or notify); the lease is memcached_lease.hpp.
#include <memory>
#include <string>

#include "client_pool.hpp"
#include "dlock/spi.hpp"
#include "memcached_lease.hpp"
#include "orphan_sweeper.hpp"

namespace dlock::memcached {

class memcached_backend final : public backend {
 public:
  memcached_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  // The mutex's item: its token is the holder (no owner id is stored), with its fencing token.
  // force_release deletes it with a CAS on what was read. No list: memcached cannot enumerate
  // keys. Semaphores are not looked at.
  lock_info do_inspect(const std::string& name) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::shared_ptr<client_pool> pool_;
  std::shared_ptr<orphan_sweeper> sweeper_;       // after pool_: destroyed (thread joined) before it
  std::shared_ptr<memcached_renewals> renewals_;  // the watchdog's batch; each lease keeps it alive
  std::string prefix_;
  bool restart_delay_;  // antirez's delayed restart (min_uptime_to_grant); URI restart_delay=off
};

}  // namespace dlock::memcached
