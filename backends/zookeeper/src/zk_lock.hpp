#pragma once
// zookeeper:// backend: Curator InterProcessMutex-compatible locks on ephemeral sequential nodes.
#include <memory>
#include <mutex>
#include <string>

#include "session.hpp"

namespace dlock::zookeeper {

// blocking (the server orders the waiters; we wait on a watch), fair (arrival order), expiring
// (the session), reentrant (per lock object), fencing (czxid of our node), lost_notification
// (session expiry, node deletion, optionally a suspended connection). Not renewable: the session
// keeps the node alive, there is no per-lock ttl.
capabilities declared_caps() noexcept;

// The connection a backend shares among its locks; an expired session is replaced on next use
// (the C client never revives an expired session).
class connection {
 public:
  connection(session_options options, std::string redacted_uri);
  std::shared_ptr<session> live();  // throws dlock::error
  // The server said this session is expired before its event reached us: drop it now.
  void discard(const std::shared_ptr<session>& dead);

 private:
  std::mutex mutex_;
  session_options options_;
  std::string redacted_uri_;
  std::shared_ptr<session> current_;
};

struct node_settings {
  std::string root;             // "/dlock" (no trailing '/'); "" for the namespace root
  bool creator_acl = false;     // ZOO_CREATOR_ALL_ACL (with digest auth) instead of open
};

class zookeeper_backend final : public backend {
 public:
  zookeeper_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;

 private:
  std::shared_ptr<connection> connection_;
  node_settings settings_;
};

// The ZooKeeper session behind a lease of this backend (tests: expire it from outside).
std::optional<clientid_t> session_of(const spi::lease_state& lease);
// The server ("host:port") that session is connected to right now (tests: freeze that one).
std::optional<std::string> connected_server(const spi::lease_state& lease);
// The per-name parent path for `name` under `root`: "<root>/<name>" as Curator names it when that
// is a path ZooKeeper can store, else "<root>/#<head>.<sha256>" (README: the name mapping).
std::string parent_path(const std::string& root, std::string_view name);

}  // namespace dlock::zookeeper
