#pragma once
// A grant of a reader-writer lock or a semaphore of zookeeper://: the ephemeral nodes it holds
// (one for a read or write hold, one per permit for a semaphore) in one session. Released by
// deleting them all; lost when the session is, or when any of them is deleted from outside.
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

class zk_nodes_lease;

// What the session's callbacks reach (through a weak pointer: the lease may be gone first).
struct held_nodes {
  std::shared_ptr<session> s;
  std::vector<std::string> paths;  // full paths
  std::int64_t token = 0;          // the fencing token: the largest czxid of the nodes
  std::recursive_mutex mutex;      // a lost callback runs user stop-callbacks, which may release
  zk_nodes_lease* live = nullptr;
};

class zk_nodes_lease final : public session_lease {
 public:
  // Watches every node for loss (session::watch_node, watch_own_node) before returning.
  static std::unique_ptr<zk_nodes_lease> grant(std::shared_ptr<session> s, std::vector<std::string> paths,
                                               std::int64_t token, std::string name, std::chrono::milliseconds ttl);
  zk_nodes_lease(std::shared_ptr<held_nodes> nodes, std::string name, std::chrono::milliseconds ttl);
  ~zk_nodes_lease() override;

  std::optional<std::uint64_t> fencing_token() const noexcept override {
    return static_cast<std::uint64_t>(nodes_->token);
  }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  const session& held_session() const noexcept override { return *nodes_->s; }

 private:
  std::shared_ptr<held_nodes> nodes_;
};

}  // namespace dlock::zookeeper
