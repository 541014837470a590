#pragma once
// A reader-writer lock of zookeeper://: Curator InterProcessReadWriteLock's nodes, in the folder a
// mutex of the same name uses. Each acquire queues an ephemeral sequential node,
//   <parent>/_c_<uuid>-__READ__<seq>   or   <parent>/_c_<uuid>-__WRIT__<seq>,
// and holds when
//   a reader: no exclusive node (any node but a read node: a write node, a mutex's, kazoo's
//             WriteLock's) is ahead of it; it watches the nearest exclusive node ahead;
//   a writer: no node at all is ahead of it; it watches the node right before it.
// So the server's sequence order is the grant order: readers arriving after a waiting writer wait
// for it (writer preference, no writer starvation), and everyone is served first come, first served.
#include <memory>
#include <string>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "node_creation.hpp"
#include "zk_lock.hpp"

namespace dlock::zookeeper {

class zk_rw_lock final : public rw_lock {
 public:
  zk_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<connection> conn,
             node_settings settings);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  // try_acquire (wait = false) and acquire_until.
  std::unique_ptr<spi::lease_state> attempt(access side, clock::time_point deadline, bool wait,
                                            std::error_code& ec) noexcept;
  // Our node is queued: wait until nothing that excludes it is ahead (or the deadline), then grant.
  std::unique_ptr<spi::lease_state> wait_in_queue(access side, const std::shared_ptr<session>& s, const lock_node& ours,
                                                  clock::time_point deadline, clock::time_point patience, bool wait,
                                                  std::error_code& ec);

  std::shared_ptr<connection> conn_;
  node_settings settings_;
  std::string parent_;
};

// The node ahead of `ours` (in `ordered`, every recipe's contenders in sequence order) that keeps
// `side` from holding, "" if none: for a writer its predecessor, for a reader the nearest exclusive
// node before it. Pure: tested without a server.
std::string blocking_node(access side, const std::vector<std::string>& ordered, const std::string& ours);

}  // namespace dlock::zookeeper
