#include "zk_nodes_lease.hpp"

#include "zk_lease.hpp"

namespace dlock::zookeeper {

std::unique_ptr<zk_nodes_lease> zk_nodes_lease::grant(std::shared_ptr<session> s, std::vector<std::string> paths,
                                                      std::int64_t token, std::string name,
                                                      std::chrono::milliseconds ttl) {
  auto nodes = std::make_shared<held_nodes>();
  nodes->s = std::move(s);
  nodes->paths = std::move(paths);
  nodes->token = token;
  // The lease exists before its nodes are watched: a loss from the first instant reaches it.
  auto l = std::make_unique<zk_nodes_lease>(nodes, std::move(name), ttl);
  std::weak_ptr<held_nodes> weak = nodes;
  for (const auto& path : nodes->paths) {
    nodes->s->watch_node(
        path,
        [weak](std::error_code reason) {
          if (auto n = weak.lock()) {
            std::lock_guard guard(n->mutex);
            if (n->live) n->live->mark_lost(reason);
          }
        },
        [weak](clock::time_point until) {
          if (auto n = weak.lock()) {
            std::lock_guard guard(n->mutex);
            if (n->live) n->live->extend_to(until);
          }
        });
    // A deletion from outside (an operator, break_lock) is a loss; not waited for (pipelined).
    nodes->s->watch_own_node(path);
  }
  return l;
}

zk_nodes_lease::zk_nodes_lease(std::shared_ptr<held_nodes> nodes, std::string name, std::chrono::milliseconds ttl)
    : session_lease(std::move(name), ttl, nodes->s->valid_until()), nodes_(std::move(nodes)) {
  std::lock_guard guard(nodes_->mutex);
  nodes_->live = this;
}

zk_nodes_lease::~zk_nodes_lease() {
  std::lock_guard guard(nodes_->mutex);
  nodes_->live = nullptr;
}

void zk_nodes_lease::do_release(std::error_code& ec) noexcept {
  try {
    session& s = *nodes_->s;
    for (const auto& path : nodes_->paths) s.unwatch_node(path);
    if (lost()) {
      // As a lost mutex grant: the session may have survived the lapse of validity, nodes and all;
      // they must go (in the background) or they would hold the name while the session lives.
      if (!s.expired())
        for (const auto& path : nodes_->paths) {
          const auto slash = path.rfind('/');
          s.delete_in_background(path.substr(0, slash), path.substr(slash + 1));
        }
      set_error(ec, errc::not_owner,
                "zookeeper: release of '" + name() +
                    "': the grant was lost (session expired or may have, or a node deleted)");
      return;
    }
    int failed = ZOK;
    std::string failed_path;
    const auto patience = release_patience(s);
    for (const auto& path : nodes_->paths) {  // every node, even after one failed
      const int rc = delete_own_node(s, path, patience);
      if (rc != ZOK && failed == ZOK) {
        failed = rc;
        failed_path = path;
      }
    }
    if (failed == ZOK) return;
    if (failed == ZNONODE || failed == ZSESSIONEXPIRED)
      set_error(ec, errc::not_owner, "zookeeper: release of '" + name() + "': our node " + failed_path + " is gone");
    else
      set_zk_error(ec, failed, "release of '" + name() + "' (delete " + failed_path + ")");
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, std::string("zookeeper: ") + e.what());
  }
}

}  // namespace dlock::zookeeper
