#include "session.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "dlock/acquire_stop.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/error.hpp"
#include "request.hpp"

namespace dlock::zookeeper {

void set_zk_error(std::error_code& ec, int rc, std::string_view what) {
  std::string message = "zookeeper: ";
  message += what;
  message += ": ";
  message += zerror(rc);
  errc e = errc::backend_error;
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
      rc == ZINVALIDSTATE || rc == ZSESSIONMOVED)
    e = errc::backend_unavailable;
  else if (rc == ZNOAUTH || rc == ZAUTHFAILED) {
    e = errc::authentication_failed;
    // Digest auth itself never fails (the server only records user:sha1 as our identity): a wrong
    // user or password shows up here, as nodes whose ACL does not admit us.
    if (rc == ZNOAUTH)
      message += " (the node's ACL does not admit this client: wrong or missing digest user:password?)";
  }
  set_error(ec, e, std::move(message));
}

namespace {

// The C client's log. Its callback gets no context, so there are two: while a session is being
// opened its complaints are dropped (every failed connect attempt logs a line, dozens per open;
// the exception says what failed), afterwards each line goes to dlock's background error handler,
// never straight to stderr.
void drop_client_log(const char*) {}

void route_client_log(const char* message) {
  std::string_view line(message ? message : "");
  // "<date> <time>,<ms>:<pid>(0x<thread>):ZOO_ERROR@<function>@<line>: <text>": from the level on.
  if (const auto level = line.find("ZOO_"); level != std::string_view::npos) line.remove_prefix(level);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  // A client that cannot reach a server logs the same line at every attempt, several a second, and
  // one that cycles through an ensemble's hosts alternates between their lines: each distinct line
  // is reported at most once per 10 s, and the repeats meanwhile counted and reported with it.
  constexpr auto quiet_period = std::chrono::seconds{10};
  constexpr std::size_t lines_remembered = 64;  // bounded: a new line beyond it forgets the others
  struct seen {
    std::chrono::steady_clock::time_point reported;
    unsigned repeats = 0;
  };
  static std::mutex mutex;
  static std::map<std::string, seen, std::less<>> recent;
  std::string summary;
  {
    std::lock_guard guard(mutex);
    const auto now = std::chrono::steady_clock::now();
    auto it = recent.find(line);
    if (it != recent.end() && now - it->second.reported < quiet_period) {
      ++it->second.repeats;
      return;
    }
    if (it == recent.end()) {
      if (recent.size() >= lines_remembered) recent.clear();
      it = recent.emplace(std::string(line), seen{}).first;
    }
    if (it->second.repeats > 0)
      summary = " (repeated " + std::to_string(it->second.repeats) + " times in the last " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - it->second.reported).count()) +
                " s)";
    it->second = seen{now, 0};
  }
  report_background_error(make_error_code(errc::backend_unavailable),
                          "zookeeper client: " + std::string(line) + summary);
}

// Resolves the hosts of "h1:2181,h2:2181" as the C client will: it skips a host it cannot resolve
// and fails only when none resolves, with an errno ("No such file or directory") that names
// neither the host nor the cause. Then we say which hosts and why, as an outage (a name service
// that does not answer looks the same as a typo from here; the message shows both).
void resolve_some_host(const std::string& hosts, const std::string& redacted_uri) {
  std::string failures;
  for (std::size_t start = 0; start < hosts.size();) {
    auto end = hosts.find(',', start);
    if (end == std::string::npos) end = hosts.size();
    const std::string entry = hosts.substr(start, end - start);
    start = end + 1;
    const auto colon = entry.rfind(':');
    const std::string host = entry.substr(0, colon),
                      port = colon == std::string::npos ? "2181" : entry.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (found) ::freeaddrinfo(found);
    if (rc == 0) return;
    failures += (failures.empty() ? "'" : ", '") + host + "' (" + ::gai_strerror(rc) + ")";
  }
  throw error(errc::backend_unavailable, "zookeeper: cannot resolve any host of " + redacted_uri + ": " + failures +
                                             "; expected the name or address of a ZooKeeper server");
}

}  // namespace

std::shared_ptr<session> session::start(session_options options, std::string redacted_uri) {
  std::shared_ptr<session> s(new session());
  s->options_ = std::move(options);
  s->redacted_uri_ = std::move(redacted_uri);
  resolve_some_host(s->options_.hosts, s->redacted_uri_);
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  {
    // Under the mutex, which the watcher takes first: it never sees the handle before zh_ holds it.
    std::lock_guard lock(s->mutex_);
    s->zh_.reset(zookeeper_init2(s->options_.hosts.c_str(), &session::watcher,
                                 static_cast<int>(s->options_.session_timeout.count()), nullptr, s.get(), 0,
                                 &drop_client_log));
  }
  if (!s->zh_) {
    const int cause = errno;
    throw error(errc::invalid_uri, "zookeeper: cannot start a client for " + s->redacted_uri_ + ": " +
                                       std::strerror(cause) + " (expected host:port[,host:port...])");
  }
  s->monitor_ = std::jthread([raw = s.get()](std::stop_token stop) { raw->monitor(stop); });
  return s;
}

void session::wait_established(clock::time_point deadline, std::string_view waited) const {
  std::unique_lock lock(mutex_);
  const auto gone = [&] { return state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE; };
  spi::wait_until(changed_, lock, deadline, [&] { return established_ || auth_rc_ != ZOK || gone(); });  // or a stop
  if (established_) return;
  if (auth_rc_ != ZOK || state_ == ZOO_AUTH_FAILED_STATE)
    throw error(errc::authentication_failed, "zookeeper: digest authentication failed for " + redacted_uri_ + ": " +
                                                 zerror(auth_rc_ != ZOK ? auth_rc_ : ZAUTHFAILED));
  if (gone())
    throw error(errc::backend_unavailable,
                "zookeeper: the session with " + redacted_uri_ + " expired before it was established");
  throw error(errc::backend_unavailable, "zookeeper: no session with " + redacted_uri_ + " " + std::string(waited) +
                                             " (is the ensemble up? the client keeps trying)");
}

void session::established_locked() {
  established_ = true;
  zoo_set_log_callback(zh_.get(), &route_client_log);
  state_changed_locked();
}

void session::auth_answered(int rc, const void* data) {
  auto* s = static_cast<session*>(const_cast<void*>(data));
  std::lock_guard lock(s->mutex_);
  if (rc == ZOK)
    s->established_locked();
  else if (rc != ZCLOSING)
    s->auth_rc_ = rc;
  s->state_changed_locked();
}

session::~session() {
  if (monitor_.joinable()) {
    monitor_.request_stop();
    {
      std::lock_guard lock(mutex_);
      changed_.notify_all();
    }
    monitor_.join();
  }
  zh_.reset();  // joins the client's threads before the members the watcher touches go away
}

clientid_t session::client_id() const noexcept { return *zoo_client_id(zh_.get()); }

bool session::expired() const noexcept {
  std::lock_guard lock(mutex_);
  return presumed_expired_ || state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
}

std::uint64_t session::state_stamp() const {
  std::lock_guard lock(mutex_);
  return state_changes_;
}

bool session::wait_for_state_change(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  return spi::wait_until(changed_, lock, deadline, [&] { return state_changes_ != seen; });  // or a stop
}

void session::state_changed_locked() {
  ++state_changes_;
  changed_.notify_all();
  for (auto& [path, events] : path_events_) events.cv.notify_all();
}

session::path_watch::path_watch(session& s, std::string path) : s_(s), path_(std::move(path)) {
  std::lock_guard lock(s_.mutex_);
  auto& events = s_.path_events_[path_];
  ++events.waiters;
  seen_state_ = s_.state_changes_;
  seen_events_ = events.count;
}

session::path_watch::~path_watch() {
  std::lock_guard lock(s_.mutex_);
  const auto it = s_.path_events_.find(path_);
  if (--it->second.waiters == 0) s_.path_events_.erase(it);
}

session::path_watch::outcome session::path_watch::wait(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(s_.mutex_);
  auto& events = s_.path_events_.find(path_)->second;
  const bool changed = spi::wait_until(  // a stop request ends it too
      events.cv, lock, deadline, [&] { return s_.state_changes_ != seen_state_ || events.count != seen_events_; });
  if (events.deleted) return outcome::deleted;  // whatever else happened, that node is gone for good
  if (!changed) return outcome::deadline;
  return events.count != seen_events_ ? outcome::other_event : outcome::state_changed;
}

void session::own_node_created(const std::string& path) {
  std::lock_guard lock(mutex_);
  own_nodes_.insert(path);
}

void session::own_node_deleted(const std::string& path) {
  std::lock_guard lock(mutex_);
  own_nodes_.erase(path);
}

bool session::own_node_exists(const std::string& path) const {
  std::lock_guard lock(mutex_);
  return own_nodes_.contains(path);
}

std::chrono::milliseconds session::granted_timeout() const noexcept {
  // What the server granted at the last (re)connection (it clamps the request to its
  // [min,max]SessionTimeout); what we asked for until then.
  const int granted = zoo_recv_timeout(zh_.get());
  return granted > 0 ? std::chrono::milliseconds{granted} : options_.session_timeout;
}

std::chrono::steady_clock::time_point session::valid_until_locked() const {
  return spi::lease_state::validity_after(answered_sent_, granted_timeout());
}

std::chrono::steady_clock::time_point session::valid_until() const {
  std::lock_guard lock(mutex_);
  return valid_until_locked();
}

void session::heard_from_server(std::chrono::steady_clock::time_point sent) {
  std::lock_guard lock(mutex_);
  if (sent <= answered_sent_) return;
  answered_sent_ = sent;
  if (!nodes_.empty()) changed_.notify_all();  // the monitor passes the new validity on
}

void session::watch_node(const std::string& path, std::function<void(std::error_code)> on_lost,
                         std::function<void(std::chrono::steady_clock::time_point)> on_extended) {
  std::lock_guard lock(mutex_);
  nodes_[path] = {std::move(on_lost), std::move(on_extended)};
  changed_.notify_all();  // the monitor starts watching the validity and sending heartbeats
}

void session::unwatch_node(const std::string& path) {
  std::lock_guard lock(mutex_);
  nodes_.erase(path);
}

std::vector<std::function<void(std::error_code)>> session::take_all_nodes_locked() {
  std::vector<std::function<void(std::error_code)>> out;
  for (auto& [p, node] : nodes_) out.push_back(std::move(node.on_lost));
  nodes_.clear();
  return out;
}

void session::delete_in_background(std::string parent, std::string name_prefix) {
  std::lock_guard lock(mutex_);
  orphans_.push_back({std::move(parent), std::move(name_prefix)});
  changed_.notify_all();
}

std::size_t session::background_deletes_pending() const {
  std::lock_guard lock(mutex_);
  return orphans_.size();
}

bool ride_out_disconnect(session& s, std::chrono::steady_clock::time_point patience) {
  using std::chrono::steady_clock;
  if (s.expired() || steady_clock::now() >= patience) return false;
  s.wait_for_state_change(s.state_stamp(), std::min(patience, steady_clock::now() + std::chrono::milliseconds{200}));
  return !s.expired() && !spi::stop_requested();  // a stop request of the acquire ends it as its patience would
}

bool session::delete_orphan(const orphan& o) {
  // The monitor also tells leases that their validity ran out: it never waits long for a server.
  const auto deadline = std::chrono::steady_clock::now() + granted_timeout() / 4;
  std::vector<std::string> children;
  const int rc = request::children(*this, o.parent, deadline, children);
  if (rc != ZOK) return !transient_failure(rc);  // no parent: nothing there; expired: gone with the session
  for (const auto& name : children) {
    if (!name.starts_with(o.name_prefix)) continue;
    const int drc = request::remove(*this, o.parent + "/" + name, deadline);
    if (transient_failure(drc)) return false;
  }
  return true;
}

void session::lose_all_nodes(std::unique_lock<std::mutex>& lock) {
  auto to_tell = take_all_nodes_locked();
  changed_.notify_all();
  lock.unlock();
  for (auto& tell : to_tell) tell(make_error_code(errc::lock_lost));
  lock.lock();
}

void session::tell_validity(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point until) {
  told_until_ = until;
  std::vector<std::function<void(std::chrono::steady_clock::time_point)>> to_tell;
  for (const auto& [path, node] : nodes_) to_tell.push_back(node.on_extended);
  lock.unlock();
  for (auto& tell : to_tell) tell(until);
  lock.lock();
}

void session::send_heartbeat(std::unique_lock<std::mutex>& lock) {
  struct pending_heartbeat {
    session* s;
    std::chrono::steady_clock::time_point sent;
  };
  const auto sent = std::chrono::steady_clock::now();
  heartbeat_sent_ = sent;
  lock.unlock();
  auto pending = std::make_unique<pending_heartbeat>(pending_heartbeat{this, sent});
  // A sync, not a read: a follower answers reads from its own copy for a while (syncLimit) after
  // it lost the leader, which expires our session meanwhile; a sync is answered only through the
  // leader. The completion runs on the completion thread, at the latest (ZCLOSING) inside
  // zookeeper_close, which ~session calls before its members go away, or never: the client can
  // lose requests in flight at close (tests/lsan.supp). Only a server's answer counts.
  const int rc = zoo_async(
      zh_.get(), "/",
      [](int rc, const char*, const void* data) {
        std::unique_ptr<pending_heartbeat> p(static_cast<pending_heartbeat*>(const_cast<void*>(data)));
        if (rc == ZOK) p->s->heard_from_server(p->sent);
      },
      pending.get());
  if (rc == ZOK) (void)pending.release();  // owned by the completion now
  lock.lock();
}

void session::delete_orphans(std::unique_lock<std::mutex>& lock) {
  auto work = std::exchange(orphans_, {});
  lock.unlock();
  std::vector<orphan> left;
  for (auto& o : work)
    if (!delete_orphan(o)) left.push_back(std::move(o));
  lock.lock();
  orphans_.insert(orphans_.end(), std::make_move_iterator(left.begin()), std::make_move_iterator(left.end()));
  retry_orphans_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds{200};
}

void session::monitor(std::stop_token stop) {
  using clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    const auto now = clock::now();
    auto wake = clock::time_point::max();
    const bool connected = state_ == ZOO_CONNECTED_STATE;
    const bool gone = presumed_expired_ || state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
    if (!nodes_.empty()) {
      // The nodes we hold are valid only until the server may have expired the session: tell
      // their holders at that instant, whether or not the client has noticed anything yet.
      const auto until = valid_until_locked();
      if (now >= until) {
        lose_all_nodes(lock);
        continue;
      }
      if (until != told_until_) {
        tell_validity(lock, until);
        continue;
      }
      wake = until;
      if (connected) {
        // A quarter of the timeout after the last answer (or heartbeat): the validity left never
        // falls below 3/4 of the timeout while the server answers.
        const auto heartbeat_due = std::max(answered_sent_, heartbeat_sent_) + granted_timeout() / 4;
        if (now >= heartbeat_due) {
          send_heartbeat(lock);
          continue;
        }
        wake = std::min(wake, heartbeat_due);
      }
    }
    if (state_ == ZOO_CONNECTING_STATE && !presumed_expired_) {
      // Curator's rule: disconnected for a whole session timeout, the session is gone (the client
      // hears "expired" only once it reconnects): the next acquire opens a new one.
      const auto deadline = disconnected_since_ + options_.session_timeout;
      if (now >= deadline) {
        presumed_expired_ = true;
        state_changed_locked();
        lose_all_nodes(lock);
        continue;
      }
      wake = std::min(wake, deadline);
    } else if (gone) {
      orphans_.clear();  // the server removed them with the session
    } else if (connected && !orphans_.empty()) {
      if (now >= retry_orphans_at_) {
        delete_orphans(lock);
        continue;
      }
      wake = std::min(wake, retry_orphans_at_);
    }
    if (wake == clock::time_point::max())
      changed_.wait(lock);
    else
      changed_.wait_until(lock, wake);
  }
}

void session::watcher(zhandle_t*, int type, int state, const char* path, void* ctx) {
  static_cast<session*>(ctx)->on_event(type, state, path);
}

void session::own_node_watcher(zhandle_t*, int type, int, const char* path, void* ctx) {
  static_cast<session*>(ctx)->on_own_node_event(type, path);
}

void session::watch_own_node(const std::string& path) {
  struct pending_exists {
    session* s;
    std::string path;
  };
  auto pending = std::make_unique<pending_exists>(pending_exists{this, path});
  // The completion runs on the completion thread, at the latest (ZCLOSING) inside zookeeper_close,
  // which ~session calls before its members go away, or never (lost at close, tests/lsan.supp).
  const int rc = zoo_awexists(
      zh_.get(), path.c_str(), &session::own_node_watcher, this,
      [](int rc, const Stat*, const void* data) {
        std::unique_ptr<pending_exists> p(static_cast<pending_exists*>(const_cast<void*>(data)));
        if (rc == ZNONODE) p->s->on_own_node_event(ZOO_DELETED_EVENT, p->path.c_str());
      },
      pending.get());
  if (rc == ZOK) (void)pending.release();  // owned by the completion now
  // Otherwise not sent (the handle is closing or the session is gone): the session event tells.
}

// Completion thread. Session events also reach this watcher; the default watcher handles them.
void session::on_own_node_event(int type, const char* path) {
  if (type != ZOO_DELETED_EVENT || !path) return;
  std::function<void(std::error_code)> tell;
  {
    std::lock_guard lock(mutex_);
    own_nodes_.erase(path);  // known gone before the deleting thread hears its reply
    const auto it = nodes_.find(path);
    if (it == nodes_.end()) return;  // released by us: not a loss
    tell = std::move(it->second.on_lost);
    nodes_.erase(it);
  }
  tell(make_error_code(errc::lock_lost));
}

// Runs on the client's completion thread: no I/O, no waiting.
void session::on_event(int type, int state, const char* path) {
  std::vector<std::function<void(std::error_code)>> to_tell;
  bool send_credentials = false;
  {
    std::lock_guard lock(mutex_);
    if (type == ZOO_SESSION_EVENT) {
      if (state == ZOO_CONNECTING_STATE && state_ != ZOO_CONNECTING_STATE)
        disconnected_since_ = std::chrono::steady_clock::now();
      state_ = state;
      state_changed_locked();
      if (state == ZOO_CONNECTED_STATE && !established_) {
        if (options_.digest.empty())
          established_locked();
        else if (!auth_sent_)
          send_credentials = auth_sent_ = true;
      }
      const bool gone = state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
      const bool suspended = state == ZOO_CONNECTING_STATE && options_.on_suspended == suspended_policy::lose;
      if (gone || suspended) {
        to_tell = take_all_nodes_locked();
      }
    } else if (path && *path) {
      // Only a registered waiter cares (its path_watch exists from before its watch was set).
      if (auto it = path_events_.find(path); it != path_events_.end()) {
        ++it->second.count;
        if (type == ZOO_DELETED_EVENT) it->second.deleted = true;
        it->second.cv.notify_all();
      }
      if (type == ZOO_DELETED_EVENT) {
        own_nodes_.erase(path);
        if (auto it = nodes_.find(path); it != nodes_.end()) {
          to_tell.push_back(std::move(it->second.on_lost));
          nodes_.erase(it);
          changed_.notify_all();  // the monitor may have nothing left to watch
        }
      }
    }
  }
  if (send_credentials) {
    // Asynchronous (the completion thread must not wait); the client sends them again at every
    // reconnection, and auth_answered hears the first answer. Not sent (the connection dropped
    // meanwhile): sent at the next connection.
    const int rc = zoo_add_auth(zh_.get(), "digest", options_.digest.data(), static_cast<int>(options_.digest.size()),
                                &session::auth_answered, this);
    if (rc != ZOK) {
      std::lock_guard lock(mutex_);
      auth_sent_ = false;
    }
  }
  for (auto& tell : to_tell) tell(make_error_code(errc::lock_lost));
}

}  // namespace dlock::zookeeper
