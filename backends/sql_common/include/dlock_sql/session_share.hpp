#pragma once
// Many leases on few server sessions, for locks a session can hold many of (PostgreSQL session
// advisory locks, MariaDB GET_LOCK since 10.0.2). Two parts:
//  * the shared sessions: a lease is granted on one of at most `max_sessions` pooled sessions
//    and stays bound to it (session_lease.hpp); its release runs on that session, serialised with
//    the session's other users. A session nobody holds a lock on goes back to the pool.
//  * the local key guard: a session that already holds key K grants K again (PostgreSQL stacks
//    it, GET_LOCK succeeds again), so two leases of one process on the same key could both be
//    "granted" through one session. Every acquisition therefore reserves its key in this process
//    first, and keeps it until its lease is released or lost: one process never asks the server
//    twice for a key it holds, whichever session it would use. Locks with a shared mode
//    (PostgreSQL's pg_advisory_lock_shared) use reserve_beside instead: several leases of one
//    process may hold such a key at once, and only the one that is alone with it may use a shared
//    session (the others use sessions of their own, where the server decides, so no session ever
//    stacks a grant, shared on exclusive, exclusive on shared, or shared on shared past a queued
//    writer).
// Only statements that never wait on the server run on shared sessions (try-lock, unlock, the
// liveness check). A caller that must wait for a lock waits on a session of its own (the
// backend's choice), so a blocked session never holds up another lease's release.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock_sql/pool.hpp"
#include "dlock_sql/session_lease.hpp"

namespace dlock::sql {

class session_share {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // max_sessions: how many pooled sessions leases share at most (the rest of the pool's
  // max_dedicated stays for callers that wait on a session of their own).
  session_share(std::shared_ptr<pool> connections, std::size_t max_sessions);

  // A live shared session, its mutex held by the returned lock: one not in use if any, a new one
  // while fewer than max_sessions are open, else the least held one (waiting for its current
  // statement). nullptr with ec set when no session could be had by `deadline`.
  struct picked {
    std::shared_ptr<session> s;
    std::unique_lock<dlock::detail::timed_mutex> lock;
  };
  picked pick(time_point deadline, std::error_code& ec) noexcept;

  // Gives the connections of the shared sessions nobody holds a lock on back to the pool, for a
  // caller about to check out a session of its own (the pool may be full of idle shared ones).
  void give_back_idle() noexcept;

  // The local key guard. reserve waits until no lease of this process holds or is acquiring
  // `key`, up to `deadline` (false: still reserved then; time_point::max(): no limit).
  bool reserve(const std::string& key, time_point deadline) noexcept;
  // Never waits: records one more lease of this process holding or acquiring `key` (in shared or
  // exclusive mode) and says whether it is alone with the key (no other reservation of either
  // kind: a shared session may be used), beside others (a session of its own only), or failed
  // (out of memory: nothing recorded).
  enum class beside { alone, others, failed };
  beside reserve_beside(const std::string& key, bool shared) noexcept;
  void unreserve(const std::string& key, bool shared = false) noexcept;
  // Whether a lease of this process holds or is acquiring `key` (in either mode). A lock that must
  // never share a session with another kind of lock of its name (a semaphore and a mutex of one
  // name: PostgreSQL's probes for the other kind do not see the session's own locks) reserves its
  // own key first, then asks this of the other kind's key: of two racing acquirers at least one
  // sees the other, and takes a session of its own.
  bool reserved(const std::string& key) noexcept;

  pool& connections() noexcept { return *connections_; }
  std::size_t max_sessions() const noexcept { return max_sessions_; }

 private:
  static bool live(session& s) noexcept;  // under s.mutex()

  std::shared_ptr<pool> connections_;
  std::size_t max_sessions_;
  std::mutex m_;
  std::vector<std::shared_ptr<session>> sessions_;  // under m_; kept open between leases
  std::size_t next_ = 0;                            // under m_: round robin when every one is busy
  std::size_t opening_ = 0;                         // under m_: sessions being checked out now
  std::condition_variable opened_;                  // a session was opened
  std::mutex keys_m_;
  std::condition_variable_any key_freed_;
  struct holds {
    std::size_t exclusive = 0, shared = 0;
  };
  std::unordered_map<std::string, holds> keys_;  // under keys_m_; no entry: nobody
};

// The reservation of one key, undone once: by whichever comes first of reset() (release), the
// lease's lost notification (another thread) and destruction; never again after.
class key_reservation {
 public:
  key_reservation() = default;
  key_reservation(session_share* share, std::string key, bool shared = false)
      : share_(share), key_(std::move(key)), shared_(shared) {}
  key_reservation(key_reservation&& o) noexcept
      : share_(o.share_.exchange(nullptr)), key_(std::move(o.key_)), shared_(o.shared_) {}
  key_reservation& operator=(key_reservation&&) = delete;
  ~key_reservation() { reset(); }
  const std::string& key() const noexcept { return key_; }
  void reset() noexcept {
    if (auto* s = share_.exchange(nullptr)) s->unreserve(key_, shared_);
  }

 private:
  std::atomic<session_share*> share_{nullptr};
  std::string key_;
  bool shared_ = false;
};

}  // namespace dlock::sql
