#pragma once
// memcached:// backend: the backend (owns the pool), the lock (one `add` per attempt; the core
// polls with jittered backoff, memcached cannot queue or notify) and the lease (CAS-guarded
// release and renew).
#include <memory>
#include <string>

#include "client_pool.hpp"
#include "dlock/spi.hpp"

namespace dlock::memcached {

// expiring (the item's ttl), renewable (CAS-guarded re-store), fencing (incr counter: best effort,
// an eviction or restart resets it), lost_notification (the core watchdog's CAS-guarded renewal
// finds the item gone or replaced within ttl/3; there is no server push). Not blocking, not fair,
// not reentrant.
capabilities declared_caps() noexcept;

class memcached_backend final : public backend {
 public:
  memcached_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;

 private:
  std::shared_ptr<client_pool> pool_;
  std::string prefix_;
};

}  // namespace dlock::memcached
