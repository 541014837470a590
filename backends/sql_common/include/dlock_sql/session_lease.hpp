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
// no call that decides whether the lease is held can block longer than the validity it protects.
// Shutting the socket down also sends the server our FIN when the link works: a lease lost
// because its validity ran out ends its session, and the server frees the lock.
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

#include "dlock/spi.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::sql {

class session_lease;

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
  // start + ttl - drift like any unrenewed grant (and its session is closed then, which frees
  // the lock on the server).
  session_lease(std::shared_ptr<session_monitor> monitor, std::string name, std::chrono::milliseconds ttl,
                clock::time_point start, bool confirm, pool::handle h);

  // Derived destructors call this first: no check runs on a half-destroyed lease after it.
  void stop_watching() noexcept;
  // Everything below is under connection_mutex().
  std::mutex& connection_mutex() noexcept { return m_; }
  pool::handle& connection() noexcept { return conn_; }
  // The connection goes back to the pool (keep) or is closed; the lease has none after this.
  void end_session(bool keep) noexcept;

  // Release, for a lease whose session still holds the lock: under connection_mutex(), with a
  // connection, not lost. It ends the session (end_session) whatever happens.
  virtual void release_session(std::error_code& ec) noexcept = 0;
  // "releasing lock 'name'": the start of every release message.
  virtual std::string release_label() const = 0;
  // Why a release without a session is not_owner: "its session ended, and ... released the lock then".
  virtual std::string_view freed_with_session() const noexcept = 0;

 private:
  // The checks every session lease makes before release_session: a session that ended or a lease
  // that was lost is not_owner (its socket shut down, the lock freed by the server).
  void do_release(std::error_code& ec) noexcept final;
  // Shuts the lease's socket down when the lease is lost, so a statement blocked on it returns.
  struct shut_down_socket {
    int fd;
    void operator()() const noexcept;
  };
  bool confirm_session() noexcept;  // under m_: one round trip; true when the session answered

  std::shared_ptr<session_monitor> monitor_;
  std::mutex m_;
  pool::handle conn_;
  clock::time_point next_confirm_;
  std::optional<std::stop_callback<shut_down_socket>> cut_when_lost_;
  bool watched_ = false;
};

}  // namespace dlock::sql
