#include "zk_lock.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <vector>

#include "dlock/error.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper {

capabilities declared_caps() noexcept {
  return {capability::blocking, capability::fair,    capability::expiring,
          capability::reentrant, capability::fencing, capability::lost_notification};
}

connection::connection(session_options options, std::string redacted_uri)
    : options_(std::move(options)), redacted_uri_(std::move(redacted_uri)) {}

std::shared_ptr<session> connection::live() {
  std::lock_guard lock(mutex_);
  if (!current_ || current_->expired()) current_ = session::open(options_, redacted_uri_);
  return current_;
}

void connection::discard(const std::shared_ptr<session>& dead) {
  std::lock_guard lock(mutex_);
  if (current_ == dead) current_.reset();
}

namespace {

// The next code point of UTF-8 `text` at `at` (advanced past it), or nullopt for a malformed,
// overlong or surrogate sequence.
std::optional<char32_t> next_code_point(std::string_view text, std::size_t& at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  const int length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || at + static_cast<std::size_t>(length) > text.size()) return std::nullopt;
  char32_t c = length == 1 ? lead : lead & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[at + static_cast<std::size_t>(i)]);
    if ((next & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (next & 0x3F);
  }
  static constexpr char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < smallest[length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  at += static_cast<std::size_t>(length);
  return c;
}

// ZooKeeper's PathUtils.validatePath (which Curator applies too) refuses these characters. It
// checks Java's UTF-16 units, so a code point above U+FFFF, a surrogate pair there, is refused too.
bool zookeeper_refuses(char32_t c) {
  return c <= 0x1F || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) || c >= 0xFFF0;
}

// True when "<root>/<name>" is a path ZooKeeper accepts and that no other name's mapping can
// reach: every '/'-separated component non-empty, not "." or "..", of characters ZooKeeper
// accepts; not in ZooKeeper's own /zookeeper tree; not starting with '#' (the hashed forms); and
// no component below the first that reads as a lock node (it would sit among the lock nodes of
// the name above it as a contender that never leaves).
bool usable_as_path(const std::string& root, std::string_view name) {
  if (name.empty() || name.front() == '#') return false;
  std::size_t start = 0;
  for (bool first = true;; first = false) {
    const auto slash = name.find('/', start);
    const auto component = name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (component.empty() || component == "." || component == "..") return false;
    if (first && root.empty() && component == "zookeeper") return false;
    if (!first && sequence_of(component)) return false;
    for (std::size_t at = 0; at < component.size();) {
      const auto c = next_code_point(component, at);
      if (!c || zookeeper_refuses(*c)) return false;
    }
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// "#<up to 32 leading [A-Za-z0-9_:-] of the name>.<sha256 of the name>": the same form as
// spi::safe_key's (so names hashed before keep their folder), but for every name given, even
// one made only of those characters ("zookeeper" at the namespace root).
std::string hashed_folder(std::string_view name) {
  std::string head;
  for (const char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '-';
    if (!plain || head.size() == 32) break;
    head += c;
  }
  return "#" + head + "." + spi::sha256_hex(name);
}

}  // namespace

std::string parent_path(const std::string& root, std::string_view name) {
  // As Curator's InterProcessMutex(client, "<root>/<name>") would name it, so that Curator and
  // kazoo services on that path contend with us: '/' makes nested folders, '.' is an ordinary
  // character. Only what ZooKeeper cannot store (or what would collide) is hashed, into
  // "#<readable head>.<sha256>": a name starting with '#' is always hashed, so a hashed form
  // never equals a name used as it is.
  return root + "/" + (usable_as_path(root, name) ? std::string(name) : hashed_folder(name));
}

namespace {

std::string uuid_text() {
  const auto hex = spi::random_token();  // 32 hex digits
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20, 12);
}

struct string_vector_guard {
  String_vector v{0, nullptr};
  ~string_vector_guard() { deallocate_String_vector(&v); }
};

int children_of(zhandle_t* zh, const std::string& parent, std::vector<std::string>& out) {
  string_vector_guard g;
  const int rc = zoo_get_children(zh, parent.c_str(), 0, &g.v);
  out.clear();
  if (rc == ZOK)
    for (int i = 0; i < g.v.count; ++i) out.emplace_back(g.v.data[i]);
  return rc;
}

bool transient_failure(int rc) noexcept { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

// Deletes a node of ours (a release, or a waiter giving up), riding out a dropped connection: the
// client reconnects to another server by itself and the session, with our node, survives, so the
// delete must be retried, or the node would block the name for as long as our process lives.
// "No node" after a lost reply means our first delete was applied (Curator's guaranteed delete
// reads it the same way). Bounded by twice the session timeout; past that, the delete is handed to
// the session's background deleter and the transient code is returned.
int delete_own_node(session& s, const std::string& path) {
  using std::chrono::steady_clock;
  const auto patience = steady_clock::now() + 2 * s.session_timeout();
  for (bool retried = false;; retried = true) {
    const int rc = zoo_delete(s.handle(), path.c_str(), -1);
    if (rc == ZNONODE && retried) return ZOK;
    if (!transient_failure(rc) || s.expired()) return rc;
    if (steady_clock::now() >= patience) {
      const auto slash = path.rfind('/');
      s.delete_in_background(path.substr(0, slash), path.substr(slash + 1));
      return rc;
    }
    s.wait_for_change("", s.stamp_of(""), std::min(patience, steady_clock::now() + std::chrono::milliseconds{200}));
  }
}

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
};

class zk_lease final : public spi::lease_state {
 public:
  // valid_until: the session's (session::valid_until), moved forward by extend_to.
  zk_lease(std::shared_ptr<held_node> node, std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until)
      : lease_state(std::move(name), ttl, valid_until), node_(std::move(node)) {
    std::lock_guard guard(node_->mutex);
    node_->live.push_back(this);
  }
  ~zk_lease() override {
    std::lock_guard guard(node_->mutex);
    std::erase(node_->live, this);
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return static_cast<std::uint64_t>(node_->czxid); }
  clientid_t client_id() const noexcept { return node_->s->client_id(); }
  zhandle_t* handle() const noexcept { return node_->s->handle(); }
  // The server answered again: the session, and so our node, is safe until `until`.
  void extend_to(clock::time_point until) noexcept { set_valid_until(until); }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    std::unique_lock lock(node_->mutex);
    if (node_->count > 1) {
      --node_->count;
      return;
    }
    node_->count = 0;
    lock.unlock();
    node_->s->unwatch_node(node_->path);
    if (lost()) {
      // Lost because the validity ran out, the session may have survived (the partition healed in
      // time), node and all: it must go, or it would block the name for as long as the session
      // lives. In the background, without waiting for a server that may be unreachable now (the
      // session drops the work if it expires). Still not_owner: the work done since was not protected.
      if (!node_->s->expired()) {
        const auto slash = node_->path.rfind('/');
        node_->s->delete_in_background(node_->path.substr(0, slash), node_->path.substr(slash + 1));
      }
      set_error(ec, errc::not_owner,
                "zookeeper: release of '" + name() + "': the lock was lost (session expired or may have, or node deleted)");
      return;
    }
    const int rc = delete_own_node(*node_->s, node_->path);
    if (rc == ZOK) return;
    if (rc == ZNONODE || rc == ZSESSIONEXPIRED)
      set_error(ec, errc::not_owner, "zookeeper: release of '" + name() + "': our node " + node_->path + " is gone");
    else if (transient_failure(rc))
      set_zk_error(ec, rc, "release of '" + name() + "' not confirmed (delete " + node_->path +
                               "): no server answered for two session timeouts; the node is deleted in the background "
                               "once the client reconnects, or goes with the session");
    else
      set_zk_error(ec, rc, "release of '" + name() + "' (delete " + node_->path + ")");
  }

 private:
  std::shared_ptr<held_node> node_;
};

class zk_lock final : public distributed_lock {
 public:
  zk_lock(std::string name, lock_options options, std::shared_ptr<connection> conn, node_settings settings)
      : distributed_lock(std::move(name), declared_caps(), std::move(options)),
        conn_(std::move(conn)),
        settings_(std::move(settings)),
        parent_(parent_path(settings_.root, this->name())) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return attempt(clock::now(), false, ec);
  }
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    return attempt(deadline, true, ec);
  }

 private:
  const ACL_vector* acl() const noexcept { return settings_.creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE; }

  std::unique_ptr<spi::lease_state> reenter() {
    std::lock_guard guard(mutex_);
    auto node = held_.lock();
    if (!node) return nullptr;
    std::lock_guard node_guard(node->mutex);
    if (node->count == 0) return nullptr;
    for (auto* other : node->live)
      if (other->lost()) return nullptr;  // a lost grant is not re-entered
    auto l = std::make_unique<zk_lease>(node, std::string(name()), options().ttl, node->s->valid_until());
    ++node->count;
    return l;
  }

  // Persistent nodes for the root, container nodes for the name's folders (removed by the server
  // once empty; Curator's creatingParentContainersIfNeeded makes the same).
  int ensure_parents(zhandle_t* zh) {
    std::string path;
    std::size_t at = 1;
    const auto& root = settings_.root;
    while (at <= root.size()) {
      const auto next = root.find('/', at);
      path = root.substr(0, next == std::string::npos ? root.size() : next);
      const int rc = zoo_create(zh, path.c_str(), nullptr, -1, acl(), ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return rc;
      if (next == std::string::npos) break;
      at = next + 1;
    }
    // "<root>/orders/42": "<root>/orders", then the parent itself.
    for (auto slash = parent_.find('/', root.size() + 1);; slash = parent_.find('/', slash + 1)) {
      const auto folder = parent_.substr(0, slash);
      const int rc = zoo_create(zh, folder.c_str(), nullptr, -1, acl(), ZOO_CONTAINER, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return rc;
      if (slash == std::string::npos) return ZOK;
    }
  }

  // Protected create (Curator's rule): the node name carries our UUID, so after a lost reply we
  // look for it among the children before creating again; a second node of ours would sit in the
  // queue, held by our live session, and block the name until the process exits.
  int create_node(session& s, const std::string& uuid, std::string& our_name, std::int64_t& czxid,
                  clock::time_point patience) {
    zhandle_t* zh = s.handle();
    const std::string prefix = node_prefix(uuid);
    const std::string path = parent_ + "/" + prefix;
    const std::string data = owner();
    bool maybe_created = false;
    for (int parents_made = 0;;) {
      int rc = ZOK;
      if (maybe_created) {
        std::vector<std::string> children;
        rc = children_of(zh, parent_, children);
        if (rc == ZOK || rc == ZNONODE) {
          maybe_created = false;  // unless we find it below, the lost create did not happen
          for (const auto& c : children)
            if (c.rfind(prefix, 0) == 0) {
              Stat st{};
              rc = zoo_exists(zh, (parent_ + "/" + c).c_str(), 0, &st);
              if (rc == ZOK) {
                our_name = c;
                czxid = st.czxid;
                return ZOK;
              }
              if (rc == ZNONODE) continue;  // deleted meanwhile (an operator): create anew
              maybe_created = true;  // the look itself failed: look again after the reconnect
            }
          if (!maybe_created) continue;
        }
      } else {
        Stat st{};
        std::vector<char> created(path.size() + 32);  // + the sequence number ZooKeeper appends
        rc = zoo_create2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl(),
                         ZOO_EPHEMERAL_SEQUENTIAL, created.data(), static_cast<int>(created.size()), &st);
        if (rc == ZOK) {
          const std::string full(created.data());
          our_name = full.substr(full.rfind('/') + 1);
          czxid = st.czxid;
          return ZOK;
        }
        if (rc == ZNONODE && parents_made++ < 3) {  // the container parent was swept: make it again
          rc = ensure_parents(zh);
          if (rc == ZOK) continue;
        } else if (transient_failure(rc)) {
          maybe_created = true;
        }
      }
      if (!transient_failure(rc)) return rc;
      if (!ride_out_disconnect(s, patience)) {
        if (s.expired()) return ZSESSIONEXPIRED;  // the caller starts a fresh session
        if (maybe_created) s.delete_in_background(parent_, prefix);
        return rc;
      }
    }
  }

  // A dropped connection with a live session (a server stalled or stopped): the client reconnects
  // to another server by itself, and our node and place in the queue survive. Wait a moment for
  // the reconnect and say whether to try again: not once the session is gone or `patience` is over.
  static bool ride_out_disconnect(session& s, clock::time_point patience) {
    if (s.expired() || clock::now() >= patience) return false;
    s.wait_for_change("", s.stamp_of(""), std::min(patience, clock::now() + std::chrono::milliseconds{200}));
    return !s.expired();
  }

  std::unique_ptr<spi::lease_state> attempt(clock::time_point deadline, bool wait, std::error_code& ec) noexcept {
    try {
      if (auto again = reenter()) return again;
      auto s = conn_->live();
      zhandle_t* zh = s->handle();
      // Transient failures are ridden out until the caller's deadline, and at least for a session
      // timeout: a disconnection that long ends the session (and frees our node) anyway.
      const auto patience = std::max(deadline, clock::now() + s->session_timeout());
      std::string ours;
      std::int64_t czxid = 0;
      int rc = create_node(*s, uuid_text(), ours, czxid, patience);
      if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) {  // expired, event not seen yet: one fresh session
        conn_->discard(s);
        s = conn_->live();
        zh = s->handle();
        rc = create_node(*s, uuid_text(), ours, czxid, patience);
      }
      if (rc != ZOK) {
        set_zk_error(ec, rc, "acquire of '" + std::string(name()) + "' (create under " + parent_ + ")");
        return nullptr;
      }
      const std::string our_path = parent_ + "/" + ours;
      auto give_up = [&] { (void)delete_own_node(*s, our_path); };
      std::vector<std::string> children;
      bool final_look = false;
      for (;;) {
        const auto asked = clock::now();
        rc = children_of(zh, parent_, children);
        if (rc == ZOK) s->heard_from_server(asked);  // the validity of a grant is measured from here
        if (transient_failure(rc) && ride_out_disconnect(*s, patience)) continue;
        if (rc != ZOK) {
          give_up();
          set_zk_error(ec, rc, "acquire of '" + std::string(name()) + "' (children of " + parent_ + ")");
          return nullptr;
        }
        const auto ordered = lock_nodes_in_order(children);
        const auto it = std::find(ordered.begin(), ordered.end(), ours);
        if (it == ordered.end()) {
          set_error(ec, errc::lock_lost, "zookeeper: our node " + our_path + " vanished while waiting (session expired?)");
          return nullptr;
        }
        if (it == ordered.begin()) return grant(s, our_path, czxid);
        if (!wait || final_look) {
          give_up();
          return nullptr;
        }
        // Watch only the predecessor: one waiter wakes per release (no herd).
        const std::string predecessor = parent_ + "/" + *(it - 1);
        const auto seen = s->stamp_of(predecessor);
        Stat st{};
        rc = zoo_wexists(zh, predecessor.c_str(), &session::watcher, s.get(), &st);
        if (rc == ZNONODE) continue;
        if (transient_failure(rc) && ride_out_disconnect(*s, patience)) continue;
        if (rc != ZOK) {
          give_up();
          set_zk_error(ec, rc, "acquire of '" + std::string(name()) + "' (watch " + predecessor + ")");
          return nullptr;
        }
        if (!s->wait_for_change(predecessor, seen, deadline)) final_look = true;  // one last look at the deadline
        s->forget_path(predecessor);
        if (s->expired()) {
          set_error(ec, errc::backend_unavailable, "zookeeper: the session expired while waiting for '" + std::string(name()) + "'");
          return nullptr;
        }
      }
    } catch (const dlock::error& e) {
      set_error(ec, e.code(), e.detail());
      return nullptr;
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_error, std::string("zookeeper: ") + e.what());
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> grant(const std::shared_ptr<session>& s, const std::string& path, std::int64_t czxid) {
    auto node = std::make_shared<held_node>();
    node->s = s;
    node->path = path;
    node->czxid = czxid;
    node->count = 1;
    // The lease exists before its node is watched: a loss from the first instant reaches it.
    auto l = std::make_unique<zk_lease>(node, std::string(name()), options().ttl, s->valid_until());
    std::weak_ptr<held_node> weak_node = node;
    s->watch_node(
        path,
        [weak_node](std::error_code reason) {
          if (auto n = weak_node.lock()) {
            std::lock_guard guard(n->mutex);
            const auto live = n->live;  // mark_lost may run callbacks that release and unregister
            for (auto* l : live) l->mark_lost(reason);
          }
        },
        [weak_node](clock::time_point until) {
          if (auto n = weak_node.lock()) {
            std::lock_guard guard(n->mutex);
            for (auto* l : n->live) l->extend_to(until);
          }
        });
    // The node itself: a deletion from outside (an operator, break_lock) is a lost lock. Not waited
    // for: acquire + release costs 3 round trips of latency (create, get_children, delete) + 1 pipelined.
    s->watch_own_node(path);
    std::lock_guard guard(mutex_);
    held_ = node;
    return l;
  }

  std::shared_ptr<connection> conn_;
  node_settings settings_;
  std::string parent_;
  std::mutex mutex_;
  std::weak_ptr<held_node> held_;
};

}  // namespace

std::optional<clientid_t> session_of(const spi::lease_state& lease) {
  if (auto* z = dynamic_cast<const zk_lease*>(&lease)) return z->client_id();
  return std::nullopt;
}

std::optional<std::string> connected_server(const spi::lease_state& lease) {
  auto* z = dynamic_cast<const zk_lease*>(&lease);
  if (!z) return std::nullopt;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (!zookeeper_get_connected_host(z->handle(), reinterpret_cast<sockaddr*>(&address), &length)) return std::nullopt;
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

namespace {

// uri::redacted() hides the password of user:password@ but prints query values as they are:
// hide the password of digest=user:password too (error messages, redacted_uri()).
std::string redacted_text(const uri& u) {
  auto text = u.redacted();
  const auto digest = u.get("digest");
  if (!digest) return text;
  const auto colon = digest->find(':');
  const auto shown = "digest=" + (colon == std::string::npos ? std::string("***") : digest->substr(0, colon + 1) + "***");
  const auto raw = "digest=" + *digest;
  for (auto at = text.find(raw); at != std::string::npos; at = text.find(raw, at + shown.size()))
    text.replace(at, raw.size(), shown);
  return text;
}

std::chrono::milliseconds duration_parameter(const uri& u, const char* key, std::chrono::milliseconds fallback) {
  try {
    return u.get_duration(key).value_or(fallback);
  } catch (const error&) {  // the core's message would print the URI with the digest password
    throw error(errc::invalid_uri, std::string("parameter ") + key + "='" + u.get(key).value_or("") + "' in " +
                                       redacted_text(u) + " is not a duration; expected e.g. 500ms, 30s, 2m or 1h");
  }
}

}  // namespace

zookeeper_backend::zookeeper_backend(const uri& u, const lock_options& defaults)
    : backend(declared_caps(), lock_scope::network, name_limits{}, defaults, redacted_text(u)) {
  if (u.hosts().empty()) throw error(errc::invalid_uri, redacted_text(u) + ": expected at least one host:port");
  session_options o;
  for (const auto& h : u.hosts()) {
    if (!o.hosts.empty()) o.hosts += ",";
    o.hosts += h.host + ":" + std::to_string(h.port_or(2181));
  }
  o.session_timeout = duration_parameter(u, "session_timeout", std::chrono::seconds{10});
  o.connect_timeout = duration_parameter(u, "connect_timeout", std::chrono::seconds{10});
  if (u.password()) o.digest = u.user() + ":" + *u.password();
  if (auto d = u.get("digest")) o.digest = *d;
  const auto suspended = u.get("on_suspended").value_or("keep");
  if (suspended == "lose") o.on_suspended = suspended_policy::lose;
  else if (suspended != "keep") throw error(errc::invalid_uri, redacted_text(u) + ": on_suspended must be keep or lose");
  const auto acl = u.get("acl").value_or(o.digest.empty() ? "open" : "creator");
  if (acl != "open" && acl != "creator") throw error(errc::invalid_uri, redacted_text(u) + ": acl must be open or creator");
  if (acl == "creator" && o.digest.empty())
    throw error(errc::invalid_uri, redacted_text(u) + ": acl=creator needs digest credentials (user:password@ or digest=)");
  settings_.creator_acl = acl == "creator";
  settings_.root = u.path();
  while (!settings_.root.empty() && settings_.root.back() == '/') settings_.root.pop_back();
  connection_ = std::make_shared<connection>(std::move(o), redacted_text(u));
  (void)connection_->live();  // connect now: a wrong address fails at open
}

std::unique_ptr<distributed_lock> zookeeper_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<zk_lock>(std::move(name), std::move(options), connection_, settings_);
}

}  // namespace dlock::zookeeper
