#pragma once
// Leases that belong to a server session: a FOR UPDATE transaction's row lock, a PostgreSQL
// advisory lock. The server frees them when the session ends and tells nobody, so a
// session_monitor watches every such lease of a backend:
//  * every tick (100 ms), without a round trip, whether the server has closed the session (its
//    socket shows EOF or the server's goodbye): lost at once;
//  * every ttl/3 (unless the lock's watchdog option is off), one round trip (SELECT 1) that
//    confirms the session still answers; each success moves the lease's local validity to
//    (start of that check) + ttl - drift.
// The core's watchdog fires lost when that validity runs out, on its own: in a partition, where
// neither the check nor the socket can answer, the holder is told within ttl of the last answer,
// not when the link returns. Once the lease is lost its socket is shut down, so a check or a
// release stuck on the silent link returns at once instead of after the kernel's TCP timeouts:
// no call that decides whether the lease is held can block much longer than the validity it
// protects (on a shared session, deadline_grace longer: below).
// Shutting the socket down also sends the server our FIN when the link works: a lease lost
// because its validity ran out ends its session, and the server frees the lock.
//
// Several leases may share one server session (advisory locks, GET_LOCK: session_share.hpp).
// They share its mutex (one statement at a time on a connection), its liveness (a session found
// closed, or ended by one lease that could not leave it clean, is lost for every lease on it,
// each reported by its own check within one tick) and its confirmation (one SELECT 1 per
// session per period: a lease whose check falls due reuses a confirmation another lease of the
// same session made after this lease's last one). A lease lost because its validity ran out (its
// watchdog off, or renewals too late) while other leases hold locks on its session does not
// shut the session down, which would free their locks under them: the monitor gives its lock
// back with a statement instead. That exit is bounded: a session that has not let the lease
// leave within deadline_grace of the loss (a silent link, a statement stuck on it) is shut down
// after all, so no call blocks on it longer than that.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "dlock/detail/timed_mutex.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::sql {

class session_lease;

// One server session that one lease (FOR UPDATE) or several (advisory locks, GET_LOCK) hold
// locks on. The connection goes back to the pool when the last user drops the session, unless
// the session ended (closed instead: it may still hold locks nobody releases).
class session {
 public:
  explicit session(pool::handle h) noexcept : conn_(std::move(h)) {}
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Every statement on the session runs under this mutex (timed: an acquire with a deadline
  // waits for another lease's statement on a shared session only until its deadline).
  dlock::detail::timed_mutex& mutex() noexcept { return m_; }
  // Under mutex(): the connection, or nullptr once the session ended.
  sql::connection* conn() noexcept { return ended_ || !conn_ ? nullptr : conn_.operator->(); }
  // Under mutex(): the session is dead for every lease on it: the socket is shut down now (the
  // server frees every lock on it), the connection closed when the last user lets go.
  void end() noexcept;
  // Under mutex(), once nobody holds a lock on it: the connection goes back to the pool now
  // (closed if the session ended), not when the last reference goes; unusable after this. A
  // session kept for sharing (session_share) stays open unless a checkout waits for its
  // connection: give_back_unless_kept.
  void give_back() noexcept;
  void give_back_unless_kept() noexcept {
    if (!kept_ || ended_ || conn_.pool_has_waiters()) give_back();
  }
  // session_share keeps the session open between leases.
  void keep_for_sharing() noexcept { kept_ = true; }
  bool ended() const noexcept { return ended_.load(); }
  // Under mutex(): the start of the last statement that proved the session alive.
  std::chrono::steady_clock::time_point answered_at() const noexcept { return answered_at_; }
  void answered(std::chrono::steady_clock::time_point start) noexcept { answered_at_ = std::max(answered_at_, start); }
  // Leases holding a lock on this session (changed under mutex(); session_share reads it
  // without, to pick the least used).
  std::atomic<std::size_t> holders{0};
  // Under mutex(), for a grant a statement on this session just made: counts its lease among
  // the holders, unless a lost lease that was its only other holder shut the socket down
  // meanwhile (false: the lock goes with the session). A give-back's bound that fires later (its
  // session could not let the lost lease leave within deadline_grace) is not seen here: the
  // session's other leases, this one included, are then lost at the monitor's next tick.
  bool add_holder() noexcept;

  // How a lost lease leaves its session, decided once (the first of its lost callback, the
  // monitor, its release or its destructor to ask): `cut`, the socket `fd` shut down, when no
  // other lease holds a lock on the session (the server frees the lease's lock with it, even over
  // a silent link); `statement`, when others do: the session lives on for them, and the lost
  // lease gives its own lock back, by deadline_grace from now, when `bound` (the lease's, on
  // `fd`) shuts the socket down after all. `decided` is the lease's, read and written only here.
  // Any thread; never waits on the network, and never ends the session itself (that happens
  // under mutex(), when a statement on it fails).
  enum class lost_exit : std::uint8_t { undecided, cut, statement };
  lost_exit exit_of_lost(int fd, lost_exit& decided, socket_guard& bound) noexcept;

 private:
  std::mutex membership_;  // orders a lost lease's cut against a grant joining the session
  bool cut_ = false;       // under membership_: a lost lease shut the socket down
  dlock::detail::timed_mutex m_;
  pool::handle conn_;
  std::atomic<bool> ended_{false};
  bool kept_ = false;
  std::chrono::steady_clock::time_point answered_at_{};
};

// A session lease's validity counts from the start of its granting statement, the last moment
// the session is known to have been alive. A statement that waited on the server for the grant
// (pg_advisory_lock, GET_LOCK with a timeout, a FOR UPDATE wait) may have started a ttl ago or
// more: the lease would be handed out with its validity spent, and lost at the monitor's next
// tick, its session ended and the lock freed under a holder just granted it. After a wait of a
// confirmation period (ttl/3) or more, one round trip (SELECT 1) on the granting connection
// moves `start` to now. Returns false, with `err`, when that round trip fails: the session and
// its lock are gone.
bool rebase_after_wait(connection& c, std::chrono::milliseconds ttl, std::chrono::steady_clock::time_point& start,
                       sql_error& err) noexcept;

// One thread per backend (started with its first lease) that checks the backend's session leases.
class session_monitor {
 public:
  explicit session_monitor(std::chrono::milliseconds tick = std::chrono::milliseconds{100}) : tick_(tick) {}
  ~session_monitor();
  session_monitor(const session_monitor&) = delete;
  session_monitor& operator=(const session_monitor&) = delete;

  void add(session_lease* l);
  // Returns once no check of `l` is running (a lease's destructor calls it first).
  void remove(session_lease* l) noexcept;
  // Checks every lease now rather than at the next tick (a lease was lost: it leaves its session).
  void wake() noexcept { wake_.notify_all(); }

 private:
  void loop() noexcept;
  void check_each(std::unique_lock<std::mutex>& lk) noexcept;
  std::chrono::milliseconds tick_;
  std::mutex m_;
  std::condition_variable wake_, check_done_;
  std::list<session_lease*> leases_;
  session_lease* checking_ = nullptr;  // the lease checked right now, outside m_
  bool stopping_ = false;
  std::thread thread_;
};

class session_lease : public spi::lease_state {
 public:
  ~session_lease() override;

  // The monitor's thread: is the session closed (no round trip), and, when due, does it answer?
  void check() noexcept;

 protected:
  // `start`: taken before the granting statement was sent. `ttl`: how long the holder may go
  // without a confirmed session before it must assume the lock is gone. `confirm`: the lock
  // option `watchdog`; without it the session is never confirmed, so the lease ends at
  // start + ttl - drift like any unrenewed grant (and leaves its session then: exit_of_lost).
  session_lease(std::shared_ptr<session_monitor> monitor, std::string name, std::chrono::milliseconds ttl,
                clock::time_point start, bool confirm, pool::handle h);
  // A lease on a session others may share; the caller counted it (s->add_holder()), under its mutex.
  session_lease(std::shared_ptr<session_monitor> monitor, std::string name, std::chrono::milliseconds ttl,
                clock::time_point start, bool confirm, std::shared_ptr<session> s);

  // The monitor checks the lease from its own thread, calling its virtual functions: derived
  // constructors call start_watching last, when the whole lease exists, and derived destructors
  // call stop_watching first, so that no check runs on a half-built or half-destroyed lease.
  void start_watching();
  void stop_watching() noexcept;
  // Everything below is under connection_mutex() (the session's, shared with its other leases).
  dlock::detail::timed_mutex& connection_mutex() noexcept { return session_->mutex(); }
  // The session's connection while this lease is on it and the session lives, else nullptr.
  sql::connection* connection() noexcept { return attached_ ? session_->conn() : nullptr; }
  // The lease leaves its session: clean (keep: the lock released, the session usable by others
  // and the pool) or not (the session ends, for every lease on it). No connection after this.
  void end_session(bool keep) noexcept;
  // Under connection_mutex(), once lost: leaves the session by its exit (session::exit_of_lost),
  // giving the lock back with release_session when others hold locks on it. For a destructor too.
  void leave_after_loss() noexcept;
  // The session this lease is on (for statements that prove it alive: session::answered).
  session& shared_session() noexcept { return *session_; }

  // Release, for a lease whose session still holds the lock: under connection_mutex(), with a
  // connection, not lost. It ends the session (end_session) whatever happens.
  virtual void release_session(std::error_code& ec) noexcept = 0;
  // Called by end_session, after the lease left its session (and the session, unless kept, was
  // shut down): what the lease holds because of the session (a local key reservation) goes.
  virtual void left_session() noexcept {}
  // "releasing lock 'name'": the start of every release message.
  virtual std::string release_label() const = 0;
  // Why a release without a session is not_owner: "its session ended, and ... released the lock then".
  virtual std::string_view freed_with_session() const noexcept = 0;

 private:
  // The checks every session lease makes before release_session: a session that ended or a lease
  // that was lost is not_owner (its socket shut down, or its lock given back).
  void do_release(std::error_code& ec) noexcept final;
  // On the lost token: the lease's exit is decided at once (a cut shuts the socket down, so a
  // statement blocked on it returns), and the monitor is woken to carry it out.
  struct on_lost {
    session_lease* lease;
    void operator()() const noexcept;
  };
  bool confirm_session() noexcept;  // under the session's mutex: true when the session answered

  std::shared_ptr<session_monitor> monitor_;
  std::shared_ptr<session> session_;
  bool attached_ = true;               // under the session's mutex
  clock::time_point confirmed_basis_;  // the start of the check this lease's validity counts from
  clock::time_point next_confirm_;
  // The socket number stays valid while this lease holds the session (closed only when its last
  // user drops it), so a cut can never shut down a reused number.
  int socket_ = -1;
  session::lost_exit exit_ = session::lost_exit::undecided;  // the session's membership mutex guards it
  socket_guard exit_bound_;  // armed on socket_ by a statement exit, disarmed when the lease leaves
  bool watched_ = false;
  // Last: destroyed first, while everything its callback reads still lives.
  std::optional<std::stop_callback<on_lost>> when_lost_;
};

}  // namespace dlock::sql
