#pragma once
// A lock of zookeeper://: Curator InterProcessMutex's recipe. Queue with an ephemeral sequential
// node (node_creation.hpp), hold when it is first among the contenders, else watch only its
// predecessor; re-entry per lock object.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "node_creation.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"

namespace dlock::zookeeper {

struct node_settings {
  std::string root;          // "/dlock" (no trailing '/'); "" for the namespace root
  bool creator_acl = false;  // ZOO_CREATOR_ALL_ACL (with digest auth) instead of open
};

class zk_lock final : public distributed_lock {
 public:
  // `node_name`: mutex_node_name, or latch_node_name for an election's candidate (Curator
  // LeaderLatch's layout, sequence.hpp); either excludes the other.
  zk_lock(std::string name, lock_options options, std::shared_ptr<connection> conn, node_settings settings,
          std::string_view node_name = mutex_node_name);
  // A lock whose nodes go in `parent` itself (a semaphore's internal mutex at "<path>/locks"): it
  // does not look for a semaphore of its name (it is a semaphore's own).
  zk_lock(std::string name, lock_options options, std::shared_ptr<connection> conn, node_settings settings,
          std::string parent);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override;
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override;

 private:
  // The lease of a re-entry when this lock object holds a grant that is not lost; else nullptr.
  std::unique_ptr<spi::lease_state> reenter();
  // try_acquire (wait = false) and acquire_until.
  std::unique_ptr<spi::lease_state> attempt(clock::time_point deadline, bool wait, std::error_code& ec) noexcept;
  // Creates our node, in a fresh session if the server says ours expired. Throws dlock::error.
  int create(std::shared_ptr<session>& s, clock::time_point patience, lock_node& ours);
  // Our node is queued: wait until it is first (or the deadline), then grant. No request is waited
  // for past `patience`. A semaphore of the name refuses it (errc::name_conflict).
  std::unique_ptr<spi::lease_state> wait_in_queue(const std::shared_ptr<session>& s, const lock_node& ours,
                                                  clock::time_point deadline, clock::time_point patience, bool wait,
                                                  std::error_code& ec);
  // A node that was ahead of ours in the queue when we read it; `own`: this session's, and its
  // delete not yet answered then (so its deletion will be known without asking the server).
  struct node_ahead {
    std::string path;
    bool own = false;
  };
  using queue_ahead = std::vector<node_ahead>;
  // True if every node of `ahead` is known deleted: `deleted` itself (the watched predecessor), or
  // a node of this session whose delete the server has answered since.
  static bool all_known_gone(const session& s, const queue_ahead& ahead, const std::string& deleted);
  std::unique_ptr<spi::lease_state> grant(const std::shared_ptr<session>& s, const std::string& path,
                                          std::int64_t czxid);

  std::shared_ptr<connection> conn_;
  node_settings settings_;
  std::string parent_;
  std::string_view node_name_ = mutex_node_name;
  std::string semaphore_leases_;  // "<parent>/leases", looked at for a semaphore of this name; "" for none
  std::mutex mutex_;
  std::weak_ptr<held_node> held_;
};

}  // namespace dlock::zookeeper
