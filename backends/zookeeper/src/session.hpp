#pragma once
// One ZooKeeper session shared by every lock of a backend. Runs the sync API from caller threads;
// the client's completion thread only ever runs session::on_event, which takes a mutex for a few
// instructions, bumps a counter, notifies a condition variable and fires lost tokens: it never
// blocks on I/O (the C client would stall every other callback).
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/spi.hpp"

namespace dlock::zookeeper {

enum class suspended_policy { keep, lose };

struct session_options {
  std::string hosts;  // "h1:2181,h2:2181"
  std::chrono::milliseconds session_timeout{10000};
  // How long dlock::open waits for the session; the backend reads it from the URI.
  std::chrono::milliseconds connect_timeout{10000};
  std::string digest;  // "user:password", or empty
  suspended_policy on_suspended = suspended_policy::keep;
};

class session : public std::enable_shared_from_this<session> {
 public:
  using clock = std::chrono::steady_clock;
  // Starts a session: the client connects (and, with digest credentials, authenticates) in the
  // background; wait_established() waits for it. Throws dlock::error when no host resolves or the
  // client cannot be started.
  static std::shared_ptr<session> start(session_options options, std::string redacted_uri);
  // Returns once the session is established (connected, and authenticated with digest
  // credentials); throws dlock::error (backend_unavailable, authentication_failed) when it is not
  // by `deadline`, saying `waited` ("within 10000ms") for how long. A session that is not
  // established by then keeps trying in the background, for the next caller.
  void wait_established(clock::time_point deadline, std::string_view waited) const;
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  zhandle_t* handle() const noexcept { return zh_.get(); }
  clientid_t client_id() const noexcept;
  bool expired() const noexcept;
  std::chrono::milliseconds session_timeout() const noexcept { return options_.session_timeout; }

  // The instant after which the server may have expired this session (and given our nodes'
  // locks to others): the send time of the newest request it answered, plus the session timeout
  // the server granted, minus the drift allowance of lease_state::validity_after. The server
  // expires a session one timeout after the last packet it received from us, which is no earlier
  // than any request whose reply we got, so this is measured from the server's last sign of life,
  // not from when the client noticed a disconnection (that comes 2/3 of a timeout later).
  std::chrono::steady_clock::time_point valid_until() const;
  // A request sent at `sent` was answered by a server: the session was alive on the server then.
  void heard_from_server(std::chrono::steady_clock::time_point sent);

  // Session state changes (connected, disconnected, expired): a counter to wait on.
  std::uint64_t state_stamp() const;
  // Waits until the state changed since `seen` or the deadline passed. True if it changed.
  bool wait_for_state_change(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const;

  // A waiter's interest in the events on one path (its predecessor), registered before the watch
  // is set so that no event is missed. Each path has its own condition variable: an event wakes
  // only the thread waiting for that path, not every waiter of the session (with 128 waiters on
  // one session, a wake-up of all of them per event cost more than the server's commit).
  class path_watch {
   public:
    enum class outcome {
      deleted,        // the node was deleted
      other_event,    // another event on the path (data changed, watch removed)
      state_changed,  // the session's state changed
      deadline
    };
    path_watch(session& s, std::string path);
    ~path_watch();
    path_watch(const path_watch&) = delete;
    path_watch& operator=(const path_watch&) = delete;
    outcome wait(std::chrono::steady_clock::time_point deadline);

   private:
    session& s_;
    std::string path_;
    std::uint64_t seen_state_, seen_events_;
  };

  // The nodes this session created and has not yet seen deleted (the create was answered, no
  // delete answered yet). A waiter that read a node of ours ahead of it in the queue learns of that
  // node's deletion here, without asking the server: only a node gone from this set is known gone.
  void own_node_created(const std::string& path);
  void own_node_deleted(const std::string& path);
  bool own_node_exists(const std::string& path) const;

  // `on_lost` is called (on the completion thread or the monitor thread, outside the session
  // mutex) when the session is lost, its validity ran out (valid_until() passed: the server may
  // have expired it), the connection dropped with the `lose` policy, or the node at `path` was
  // deleted. Must not block. `on_extended` is called (on the monitor thread) with the new
  // valid_until() each time a server answer moves it. While a node is watched the monitor sends a
  // heartbeat (a sync of "/", answered through the leader) a quarter of the session timeout after
  // the last answer, so the validity keeps moving while the session is healthy.
  void watch_node(const std::string& path, std::function<void(std::error_code)> on_lost,
                  std::function<void(std::chrono::steady_clock::time_point)> on_extended);
  void unwatch_node(const std::string& path);
  // Leave an exists-watch on a node we were just granted, without waiting for the reply (the grant
  // needs the watch, not the answer: one round trip less per acquire). The session answers requests
  // in order, so a later delete of the node is processed after it. A reply "no node" (deleted in
  // between) is a loss like the deletion event. Call after watch_node(path, ...).
  void watch_own_node(const std::string& path);

  // A node of ours that may exist and could not be deleted now: a delete that kept failing with a
  // dropped connection, or a create whose reply was lost and never confirmed (named by its
  // protected prefix, `name_prefix`). The monitor thread deletes every child of `parent` with that
  // prefix once connected, retrying until done or the session ends (Curator's
  // FindAndDeleteProtectedNodeInBackground): left alone, the node would block the name for as
  // long as this session lives.
  void delete_in_background(std::string parent, std::string name_prefix);
  std::size_t background_deletes_pending() const;

  static void watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  // The exists-watch on a node we hold: only its deletion matters (lost); it is not counted in
  // path_events_ (no waiter registers it).
  static void own_node_watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);

 private:
  session() = default;
  void on_event(int type, int state, const char* path);
  // The answer to our digest credentials (the completion thread).
  static void auth_answered(int rc, const void* data);
  // Connected and, with credentials, authenticated: the client's log goes to the handler from now on.
  void established_locked();
  void on_own_node_event(int type, const char* path);
  // A session state change: counted, and every waiter (monitor, retries, path watches) woken.
  void state_changed_locked();
  // Curator's rule: disconnected for a whole session timeout means the session is gone, even
  // though the client only hears "expired" from a server once it reconnects (which, without a
  // quorum, it cannot). Also runs the background deletes. Its own thread, never the completion thread.
  void monitor(std::stop_token stop);
  std::vector<std::function<void(std::error_code)>> take_all_nodes_locked();
  // Monitor-thread steps; each is entered and left with `lock` held, and unlocks it while calling out.
  void lose_all_nodes(std::unique_lock<std::mutex>& lock);
  void tell_validity(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point until);
  void send_heartbeat(std::unique_lock<std::mutex>& lock);
  void delete_orphans(std::unique_lock<std::mutex>& lock);
  std::chrono::steady_clock::time_point valid_until_locked() const;
  std::chrono::milliseconds granted_timeout() const noexcept;
  struct orphan {
    std::string parent, name_prefix;
  };
  // True when done: deleted, or nothing (left) to delete. False: try again later.
  bool delete_orphan(const orphan& o);

  struct zh_deleter {
    void operator()(zhandle_t* zh) const noexcept { zookeeper_close(zh); }
  };
  std::unique_ptr<zhandle_t, zh_deleter> zh_;
  session_options options_;
  std::string redacted_uri_;
  mutable std::mutex mutex_;
  mutable std::condition_variable_any changed_;
  std::uint64_t state_changes_ = 0;
  struct path_events {
    std::uint64_t count = 0;
    bool deleted = false;
    unsigned waiters = 0;  // path_watch objects on this path; the entry goes with the last
    std::condition_variable_any cv;
  };
  std::map<std::string, path_events> path_events_;
  std::set<std::string> own_nodes_;
  int state_ = 0;
  bool established_ = false;
  bool auth_sent_ = false;
  int auth_rc_ = ZOK;  // the server's answer to our credentials, or why they could not be sent
  std::chrono::steady_clock::time_point disconnected_since_{};
  bool presumed_expired_ = false;
  struct watched_node {
    std::function<void(std::error_code)> on_lost;
    std::function<void(std::chrono::steady_clock::time_point)> on_extended;
  };
  std::map<std::string, watched_node> nodes_;
  // Send time of the newest request a server answered (valid_until() is measured from it).
  std::chrono::steady_clock::time_point answered_sent_{};
  std::chrono::steady_clock::time_point heartbeat_sent_{};  // the last heartbeat sent
  std::chrono::steady_clock::time_point told_until_{};      // the validity last given to on_extended
  std::chrono::steady_clock::time_point retry_orphans_at_{};
  std::vector<orphan> orphans_;
  std::jthread monitor_;  // last: stopped and joined first
};

// A ZooKeeper return code as a dlock error.
void set_zk_error(std::error_code& ec, int rc, std::string_view what);

// A dropped connection or an unanswered request: the session (and our nodes) may well live on,
// the client reconnects by itself, and the request may or may not have been applied.
inline bool transient_failure(int rc) noexcept { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

// A transient failure with the session alive (a server stalled or stopped): the client reconnects
// to another server by itself, and our nodes and places in queues survive. Waits a moment (at most
// 200 ms) for the reconnect and says whether to try again: not once the session is gone or
// `patience` is over, nor once the acquire around it was asked to stop.
bool ride_out_disconnect(session& s, std::chrono::steady_clock::time_point patience);

}  // namespace dlock::zookeeper
