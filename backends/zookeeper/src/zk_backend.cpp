#include "zk_backend.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "capabilities.hpp"
#include "dlock/error.hpp"
#include "name_mapping.hpp"
#include "request.hpp"
#include "sequence.hpp"
#include "session.hpp"
#include "zk_rw_lock.hpp"
#include "zk_semaphore.hpp"

namespace dlock::zookeeper {

namespace {

// The session options of zookeeper://[user:password@]h1:2181,h2/root?session_timeout=..&
// connect_timeout=..&digest=user:pw&on_suspended=keep|lose. Every message shows u.redacted(),
// which hides the password of user:password@ and the value of digest=.
session_options session_options_of(const uri& u) {
  if (u.hosts().empty()) throw error(errc::invalid_uri, u.redacted() + ": expected at least one host:port");
  session_options o;
  for (const auto& h : u.hosts()) {
    if (!o.hosts.empty()) o.hosts += ",";
    o.hosts += h.host + ":" + std::to_string(h.port_or(2181));
  }
  o.session_timeout = u.get_duration("session_timeout").value_or(std::chrono::seconds{10});
  // A host that accepts connections and never answers holds the client for 2/3 of the session
  // timeout before it tries the next one: by default open waits at least a session timeout, so
  // one such host in a list does not fail it.
  o.connect_timeout = u.get_duration("connect_timeout")
                          .value_or(std::max<std::chrono::milliseconds>(std::chrono::seconds{10}, o.session_timeout));
  if (u.password()) o.digest = u.user() + ":" + *u.password();
  if (auto d = u.get("digest")) o.digest = *d;
  const auto suspended = u.get("on_suspended").value_or("keep");
  if (suspended == "lose")
    o.on_suspended = suspended_policy::lose;
  else if (suspended != "keep")
    throw error(errc::invalid_uri, u.redacted() + ": on_suspended must be keep or lose");
  return o;
}

// The path and ACL of our nodes: acl=open|creator (creator, the default with credentials, needs them).
node_settings node_settings_of(const uri& u, const session_options& o) {
  const auto acl = u.get("acl").value_or(o.digest.empty() ? "open" : "creator");
  if (acl != "open" && acl != "creator") throw error(errc::invalid_uri, u.redacted() + ": acl must be open or creator");
  if (acl == "creator" && o.digest.empty())
    throw error(errc::invalid_uri, u.redacted() + ": acl=creator needs digest credentials (user:password@ or digest=)");
  node_settings settings;
  settings.creator_acl = acl == "creator";
  settings.root = u.path();
  while (!settings.root.empty() && settings.root.back() == '/') settings.root.pop_back();
  // Refused here rather than by every acquire ("bad arguments" from the server).
  if (!usable_root(settings.root))
    throw error(errc::invalid_uri,
                u.redacted() + ": the path '" + settings.root +
                    "' is not a ZooKeeper path (an empty, '.' or '..' component, or a character ZooKeeper refuses)");
  return settings;
}

// A name that would silently mean another node than the one a Curator or kazoo user means by it
// is refused when the lock is made (name_mapping.hpp).
void check_name(const node_settings& settings, std::string_view name) {
  if (auto why = refusal(settings.root, name); !why.empty()) throw error(errc::invalid_name, why);
}

}  // namespace

zookeeper_backend::zookeeper_backend(const uri& u, const lock_options& defaults)
    : backend(zookeeper_caps, zookeeper_primitives, lock_scope::network, name_limits{}, defaults, u.redacted()) {
  const auto options = session_options_of(u);
  settings_ = node_settings_of(u, options);
  connection_ = std::make_shared<connection>(options, u.redacted());
  // Connect now (a wrong address fails at open), within connect_timeout whatever the servers do.
  const auto waited = "within " + std::to_string(options.connect_timeout.count()) + "ms (connect_timeout)";
  (void)connection_->live(std::chrono::steady_clock::now() + options.connect_timeout, waited);
}

std::unique_ptr<distributed_lock> zookeeper_backend::do_make_lock(std::string name, lock_options options) {
  check_name(settings_, name);
  return std::make_unique<zk_lock>(std::move(name), std::move(options), connection_, settings_);
}

std::unique_ptr<rw_lock> zookeeper_backend::do_make_rw_lock(std::string name, lock_options options) {
  check_name(settings_, name);
  return std::make_unique<zk_rw_lock>(std::move(name), rw_caps(), std::move(options), connection_, settings_);
}

std::unique_ptr<semaphore> zookeeper_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                                lock_options options) {
  check_name(settings_, name);
  return std::make_unique<zk_semaphore>(std::move(name), max_count, semaphore_caps(), std::move(options), connection_,
                                        settings_);
}

lock_info zookeeper_backend::do_inspect(const std::string& name) {
  check_name(settings_, name);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto s = connection_->live(deadline, "within 10s (inspect)");
  const auto parent = parent_path(settings_.root, name);
  std::vector<std::string> nodes;
  int rc = request::children(*s, parent, deadline, nodes);
  lock_info info;
  info.waiters_known = true;
  if (rc == ZNONODE) return info;
  if (rc != ZOK) throw error(errc::backend_unavailable, "zookeeper: cannot list " + parent + ": " + zerror(rc));
  // Every recipe's contenders in arrival order, across the sequence counter's wrap (sequence.hpp).
  const auto queue = lock_nodes_in_order(nodes);
  bool holding = true;  // still in the holders at the head of the queue
  for (const auto& node : queue) {
    std::string owner;
    rc = request::data(*s, parent + "/" + node, deadline, owner);
    if (rc == ZNONODE) continue;  // left meanwhile
    if (rc != ZOK)
      throw error(errc::backend_unavailable, "zookeeper: cannot read " + parent + "/" + node + ": " + zerror(rc));
    const auto kind = is_read_node(node)                                ? hold_kind::read
                      : node.find(write_node_name) != std::string::npos ? hold_kind::write
                                                                        : hold_kind::mutex;
    // The lowest node holds; readers hold together up to the first writer (Curator's rules).
    const bool holds =
        holding && (info.holders.empty() || (kind == hold_kind::read && info.holders.back().kind == hold_kind::read));
    if (holds) {
      lock_holder h;
      h.owner = owner;
      h.kind = kind;
      info.holders.push_back(std::move(h));
    } else {
      holding = false;
      info.waiters.push_back({owner, kind});
    }
  }
  return info;
}

}  // namespace dlock::zookeeper
