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

// Curator LeaderLatch's layout: a LeaderLatch on the name's path and a dlock election of the name
// are candidates of one election (the node's data is the candidate's id, as LeaderLatch writes it).
std::unique_ptr<distributed_lock> zookeeper_backend::do_make_election_lock(std::string name, lock_options options) {
  check_name(settings_, name);
  return std::make_unique<zk_lock>(std::move(name), std::move(options), connection_, settings_, latch_node_name);
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

namespace {

using steady = std::chrono::steady_clock;

// A contender node of a name's folder: where it is, whose it is (its data: the owner id), and
// whether it holds.
struct contender {
  std::string path;
  std::string owner;
  hold_kind kind = hold_kind::mutex;
  bool holds = false;
  Stat stat{};  // its czxid is the fencing token its lease carries
};

// The contenders of `parent` in arrival order (empty when the folder does not exist): the lowest
// node holds, readers hold together up to the first writer (Curator's rules).
std::vector<contender> contenders_of(session& s, const std::string& parent, steady::time_point deadline) {
  std::vector<std::string> nodes;
  int rc = request::children(s, parent, deadline, nodes);
  if (rc == ZNONODE) return {};
  if (rc != ZOK) throw error(errc::backend_unavailable, "zookeeper: cannot list " + parent + ": " + zerror(rc));
  std::vector<contender> queue;
  bool holding = true;  // still in the holders at the head of the queue
  // Every recipe's contenders in arrival order, across the sequence counter's wrap (sequence.hpp).
  for (const auto& node : lock_nodes_in_order(nodes)) {
    contender c;
    c.path = parent + "/" + node;
    rc = request::data(s, c.path, deadline, c.owner, &c.stat);
    if (rc == ZNONODE) continue;  // left meanwhile
    if (rc != ZOK) throw error(errc::backend_unavailable, "zookeeper: cannot read " + c.path + ": " + zerror(rc));
    c.kind = is_read_node(node)                                ? hold_kind::read
             : node.find(write_node_name) != std::string::npos ? hold_kind::write
                                                               : hold_kind::mutex;
    c.holds = holding && (queue.empty() || (c.kind == hold_kind::read && queue.back().kind == hold_kind::read));
    holding = c.holds;
    queue.push_back(std::move(c));
  }
  return queue;
}

lock_holder holder_of(const contender& c) {
  lock_holder h;
  h.owner = c.owner;
  h.kind = c.kind;
  h.fencing_token = static_cast<std::uint64_t>(c.stat.czxid);  // as zk_lease gives it
  // No `since`: the node's ctime is when it queued, not when it began to hold.
  return h;
}

}  // namespace

lock_info zookeeper_backend::do_inspect(const std::string& name) {
  check_name(settings_, name);
  const auto deadline = steady::now() + std::chrono::seconds(10);
  auto s = connection_->live(deadline, "within 10s (inspect)");
  lock_info info;
  info.name = name;
  info.waiters_known = true;
  for (auto& c : contenders_of(*s, parent_path(settings_.root, name), deadline)) {
    if (c.holds)
      info.holders.push_back(holder_of(c));
    else
      info.waiters.push_back({std::move(c.owner), c.kind});
  }
  info.held = !info.holders.empty();
  return info;
}

// The folders below the root, walked only where a name with the prefix can be (a name "a/b" is
// the folder a/b: a name's folder may also hold other names' folders). A folder with contender
// nodes is a held name (a mutex or a reader-writer lock; a semaphore's leases are no contenders).
// Hashed folders ("#...", names ZooKeeper cannot store as a path) keep no trace of their name and
// are not listed. A folder whose ACL this client may not read (another identity's names, made with
// its credentials) is not listed either: one such folder must not make the whole list fail. A root
// it may not read is an error.
std::vector<std::string> zookeeper_backend::do_list(const std::string& prefix) {
  const auto deadline = steady::now() + std::chrono::seconds(30);
  auto s = connection_->live(deadline, "within 30s (list)");
  std::vector<std::string> names;
  std::vector<std::string> folders{""};  // names (relative paths) to look into; "" is the root
  while (!folders.empty()) {
    const auto folder = std::move(folders.back());
    folders.pop_back();
    const auto path = folder.empty() ? (settings_.root.empty() ? "/" : settings_.root) : settings_.root + "/" + folder;
    std::vector<std::string> children;
    const int rc = request::children(*s, path, deadline, children);
    if (rc == ZNONODE) continue;                     // gone meanwhile
    if (rc == ZNOAUTH && !folder.empty()) continue;  // another identity's folder
    if (rc != ZOK)
      throw error(rc == ZNOAUTH ? errc::authentication_failed : errc::backend_unavailable,
                  "zookeeper: cannot list " + path + ": " + zerror(rc));
    bool contended = false;
    for (const auto& child : children) {
      if (sequence_of(child)) {
        contended = true;
        continue;
      }
      if (child.starts_with('#')) continue;
      if (folder.empty() && settings_.root.empty() && child == "zookeeper") continue;  // the server's own tree
      const auto below = folder.empty() ? child : folder + "/" + child;
      // Only where the prefix can still match: below starts with it, or it continues below.
      if (below.starts_with(prefix) || prefix.starts_with(below + "/") || prefix == below) folders.push_back(below);
    }
    // A contender node is ephemeral: its session is alive, and the lowest one holds.
    if (!folder.empty() && contended && folder.starts_with(prefix)) names.push_back(folder);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Deletes the holding node(s). Each holder's session watches its node: the deletion is its lease
// lost; and its release then finds no node (not_owner).
std::vector<lock_holder> zookeeper_backend::do_force_release(const std::string& name) {
  check_name(settings_, name);
  const auto deadline = steady::now() + std::chrono::seconds(10);
  auto s = connection_->live(deadline, "within 10s (force_release)");
  std::vector<lock_holder> removed;
  for (const auto& c : contenders_of(*s, parent_path(settings_.root, name), deadline)) {
    if (!c.holds) break;
    const int rc = request::remove(*s, c.path, deadline);
    if (rc == ZNONODE) continue;  // released meanwhile
    if (rc != ZOK)
      throw error(rc == ZNOAUTH ? errc::authentication_failed : errc::backend_unavailable,
                  "zookeeper: cannot delete " + c.path + " (breaking '" + name + "'): " + zerror(rc));
    removed.push_back(holder_of(c));
  }
  return removed;
}

}  // namespace dlock::zookeeper
