#pragma once
// A grant of zookeeper://: the node it holds (shared by the reentrant leases of one lock object)
// and the lease, whose release deletes that node.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "session.hpp"
#include "session_lease.hpp"

namespace dlock::zookeeper {

class zk_lease;

// The node a grant holds: shared by the reentrant leases of one lock object.
struct held_node {
  std::shared_ptr<session> s;
  std::string path;
  std::int64_t czxid = 0;
  // Recursive: a lost callback fires user stop-callbacks under it, and those may release.
  std::recursive_mutex mutex;
  unsigned count = 0;
  std::vector<zk_lease*> live;  // every zk_lease of this node (registered in ctor/dtor)
  // The release waits for the server until then at the latest (a semaphore's internal mutex is
  // released within its acquire's deadline); else for two session timeouts.
  std::chrono::steady_clock::time_point release_by = std::chrono::steady_clock::time_point::max();
};

class zk_lease final : public session_lease {
 public:
  // valid_until: the session's (session::valid_until), moved forward by extend_to.
  zk_lease(std::shared_ptr<held_node> node, std::string name, std::chrono::milliseconds ttl,
           clock::time_point valid_until);
  ~zk_lease() override;
  std::optional<std::uint64_t> fencing_token() const noexcept override {
    return static_cast<std::uint64_t>(node_->czxid);
  }
  // The release waits for the server until `t` at the latest (then the background deleter takes over).
  void release_by(clock::time_point t) noexcept {
    std::lock_guard guard(node_->mutex);
    node_->release_by = t;
  }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  const session& held_session() const noexcept override { return *node_->s; }

 private:
  std::shared_ptr<held_node> node_;
};

// Deletes a node of ours (a release, or a waiter giving up), riding out a dropped connection: the
// client reconnects to another server by itself and the session, with our node, survives, so the
// delete must be retried, or the node would block the name for as long as our process lives.
// "No node" after a lost reply means our first delete was applied (Curator's guaranteed delete
// reads it the same way). Bounded by `patience`; past it, the delete is handed to the session's
// background deleter and the transient code is returned.
int delete_own_node(session& s, const std::string& path, std::chrono::steady_clock::time_point patience);
// The patience of a release: twice the session timeout (after that long the session is gone anyway).
std::chrono::steady_clock::time_point release_patience(const session& s);

// The ZooKeeper session behind a lease of this backend (tests: expire it from outside).
std::optional<clientid_t> session_of(const spi::lease_state& lease);
// The server ("host:port") that session is connected to right now (tests: freeze that one).
std::optional<std::string> connected_server(const spi::lease_state& lease);

}  // namespace dlock::zookeeper
