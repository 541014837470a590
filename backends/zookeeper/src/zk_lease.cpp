#include "zk_lease.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>

#include "dlock/acquire_stop.hpp"
#include "request.hpp"

namespace dlock::zookeeper {

namespace {

// "<parent>/<name>" -> the session's background deleter, which deletes the children of <parent>
// starting with <name> once a server answers.
void delete_in_background(session& s, const std::string& path) {
  const auto slash = path.rfind('/');
  s.delete_in_background(path.substr(0, slash), path.substr(slash + 1));
}

}  // namespace

std::chrono::steady_clock::time_point release_patience(const session& s) {
  return std::chrono::steady_clock::now() + 2 * s.session_timeout();
}

int delete_own_node(session& s, const std::string& path, std::chrono::steady_clock::time_point patience) {
  using std::chrono::steady_clock;
  // A withdrawal or a release waits for the server's answer even when the acquire around it was
  // asked to stop: a node left behind would keep the next contender out for a session timeout.
  const spi::unstoppable_scope to_the_end;
  for (bool retried = false;; retried = true) {
    const int rc = request::remove(s, path, patience);
    if (rc == ZOK || rc == ZNONODE) s.own_node_deleted(path);  // gone either way
    if (rc == ZNONODE && retried) return ZOK;
    if (!transient_failure(rc) || s.expired()) return rc;
    if (steady_clock::now() >= patience) {
      delete_in_background(s, path);
      return rc;
    }
    s.wait_for_state_change(s.state_stamp(), std::min(patience, steady_clock::now() + std::chrono::milliseconds{200}));
  }
}

zk_lease::zk_lease(std::shared_ptr<held_node> node, std::string name, std::chrono::milliseconds ttl,
                   clock::time_point valid_until)
    : session_lease(std::move(name), ttl, valid_until), node_(std::move(node)) {
  std::lock_guard guard(node_->mutex);
  node_->live.push_back(this);
}

zk_lease::~zk_lease() {
  std::lock_guard guard(node_->mutex);
  std::erase(node_->live, this);
}

void zk_lease::do_release(std::error_code& ec) noexcept {
  std::unique_lock lock(node_->mutex);
  if (node_->count > 1) {
    --node_->count;
    return;
  }
  node_->count = 0;
  const auto patience = std::min(release_patience(*node_->s), node_->release_by);
  lock.unlock();
  node_->s->unwatch_node(node_->path);
  if (lost()) {
    // Lost because the validity ran out, the session may have survived (the partition healed in
    // time), node and all: it must go, or it would block the name for as long as the session
    // lives. In the background, without waiting for a server that may be unreachable now (the
    // session drops the work if it expires). Still not_owner: the work done since was not protected.
    if (!node_->s->expired()) delete_in_background(*node_->s, node_->path);
    set_error(
        ec, errc::not_owner,
        "zookeeper: release of '" + name() + "': the lock was lost (session expired or may have, or node deleted)");
    return;
  }
  const int rc = delete_own_node(*node_->s, node_->path, patience);
  if (rc == ZOK) return;
  if (rc == ZNONODE || rc == ZSESSIONEXPIRED)
    set_error(ec, errc::not_owner, "zookeeper: release of '" + name() + "': our node " + node_->path + " is gone");
  else if (transient_failure(rc))
    set_zk_error(ec, rc,
                 "release of '" + name() + "' not confirmed (delete " + node_->path +
                     "): no server answered for two session timeouts; the node is deleted in the background "
                     "once the client reconnects, or goes with the session");
  else
    set_zk_error(ec, rc, "release of '" + name() + "' (delete " + node_->path + ")");
}

std::optional<clientid_t> session_of(const spi::lease_state& lease) {
  if (const auto* z = dynamic_cast<const session_lease*>(&lease)) return z->client_id();
  return std::nullopt;
}

std::optional<std::string> connected_server(const spi::lease_state& lease) {
  const auto* z = dynamic_cast<const session_lease*>(&lease);
  zhandle_t* zh = z ? z->handle() : nullptr;
  if (!zh) return std::nullopt;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (!zookeeper_get_connected_host(zh, reinterpret_cast<sockaddr*>(&address), &length)) return std::nullopt;
  char host[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  } else {
    return std::nullopt;
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace dlock::zookeeper
