#pragma once
// zookeeper://h1:2181[,h2:2181...]/root: the backend reads the URI into session options and node
// settings, connects at open, and makes zk_locks, zk_rw_locks and zk_semaphores that share its
// connection.
#include <memory>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "zk_lock.hpp"

namespace dlock::zookeeper {

class zookeeper_backend final : public backend {
 public:
  zookeeper_backend(const uri& u, const lock_options& defaults);  // throws dlock::error

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  std::unique_ptr<distributed_lock> do_make_election_lock(std::string name, lock_options options) override;
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  // The children of the name's folder in sequence order: the mutex's lowest node (or the readers
  // before the first writer) hold, the rest wait; each node's data is its owner id.
  lock_info do_inspect(const std::string& name) override;
  // The folders below the root that hold contender nodes (hashed folders not: they keep no name).
  std::vector<std::string> do_list(const std::string& prefix) override;
  // Deletes the holding node(s); the holders' sessions see their nodes deleted: lost.
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::shared_ptr<connection> connection_;
  node_settings settings_;
};

}  // namespace dlock::zookeeper
