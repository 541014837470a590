#pragma once
// mysql+getlock://: MariaDB/MySQL named locks (GET_LOCK / RELEASE_LOCK), held by a connection
// dedicated to the lease. The server frees the lock when that connection ends, queues waiters of
// GET_LOCK(name, timeout) itself, and knows nothing of ttl.
#include <memory>
#include <string>
#include <vector>

#include "connection.hpp"
#include "dlock/spi.hpp"

namespace dlock::mysql {

class getlock_backend final : public backend {
 public:
  static capabilities declared_caps() noexcept;
  // The connection's URI keys plus sequence= (default dlock_getlock_fence) and create_sequence=.
  static std::vector<std::string> parameters();
  getlock_backend(const uri& u, const lock_options& defaults);
  const std::shared_ptr<pool>& connections() const noexcept { return pool_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;

 private:
  std::shared_ptr<pool> pool_;
  std::shared_ptr<const std::string> get_lock_sql_;  // GET_LOCK and the fencing token, one statement
};

}  // namespace dlock::mysql
