#pragma once
// The caller's deadline inside an acquire of a SQL backend (dlock/acquire_deadline.hpp): the pool
// (connecting, waiting for a connection) and every statement below the backend's deadline scope
// read it. Connecting inside the scope takes at most until io_deadline() (the connect timeout is
// cut to what is left of it); a statement that has not answered by then has its socket shut down
// (socket_guard), so it fails at once as a lost connection, and the connection is dropped.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>

#include "dlock/acquire_deadline.hpp"
#include "dlock/acquire_stop.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::sql {

using steady_clock = std::chrono::steady_clock;
using spi::current_deadline;
using spi::deadline_grace;
using spi::deadline_scope;
using spi::io_deadline;
using spi::wait_out_outages;

// While alive, and inside a deadline scope: `fd` is shut down (shutdown(2), never closed) if the
// guard still lives at io_deadline(), so a statement stuck on it returns. Outside a scope, or for
// fd < 0, it does nothing. Destroying it before the deadline disarms it for good.
class socket_guard {
 public:
  explicit socket_guard(int fd) noexcept;
  // A guard of `fd` that only cut_at arms, inside a deadline scope or not.
  struct only_by_cut_at {};
  socket_guard(int fd, only_by_cut_at) noexcept : fd_(fd) {}
  ~socket_guard();
  socket_guard(const socket_guard&) = delete;
  socket_guard& operator=(const socket_guard&) = delete;
  // Whether it shut the socket down (the statement's failure is the deadline's).
  bool fired() const noexcept;
  // Ends the watch: from its return on, the guard never touches the socket. Whether it had shut
  // it down. A statement's answer is trusted only after this says no: the socket may be shut down
  // right after the answer arrived, and then the session ends on the server all the same, with
  // whatever lock it was granted (the destructor disarms too, without telling).
  bool disarm() noexcept;
  // Shut the socket down at `when` instead, if that is sooner, inside a scope or not. Callable
  // from another thread while the statement runs (a stop callback), never after disarm().
  void cut_at(steady_clock::time_point when) noexcept;

 private:
  int fd_ = -1;
  std::atomic<std::uint64_t> id_{0};
};

// While alive: the statements this thread runs wait on the server for a lock (FOR UPDATE, GET_LOCK,
// pg_advisory_lock), and a stop request of the acquire (dlock/acquire_stop.hpp) cuts them short:
// PostgreSQL's connection sends a cancel request, MariaDB's shuts its socket down (the server
// then rolls the session back, and a named lock it was granted goes with it). Only such waits:
// the statements that withdraw a waiter or give a grant back run outside one, to their end.
class stoppable_statements {
 public:
  stoppable_statements() noexcept;
  ~stoppable_statements();
  stoppable_statements(const stoppable_statements&) = delete;
  stoppable_statements& operator=(const stoppable_statements&) = delete;

 private:
  bool previous_;
};

// Whether a statement this thread runs now may be cut short by a stop request: inside a
// stoppable_statements scope, with a stop token that can be stopped.
bool statements_stoppable() noexcept;

// While alive, where statements_stoppable(): a stop request shuts `fd` down (shutdown(2), never
// closed), at once when it came before, so that the statement on it fails as a lost connection
// and the connection is dropped. For a client whose server has no cancel request of its own to
// send (MariaDB's needs a second connection: fired() tells the caller to send one). It does
// nothing otherwise.
class socket_stopper {
 public:
  explicit socket_stopper(int fd) noexcept;
  socket_stopper(const socket_stopper&) = delete;
  socket_stopper& operator=(const socket_stopper&) = delete;
  // Whether a stop request shut the socket down.
  bool fired() const noexcept { return state_.load(std::memory_order_acquire) == watch_state::fired; }
  // Ends the watch: a stop request from now on leaves the socket alone. Whether one had shut it
  // down (then the session is ending on the server, whatever the statement answered).
  bool disarm() noexcept;

 private:
  enum class watch_state { watching, fired, disarmed };
  struct shut_down {
    int fd;
    std::atomic<watch_state>* state;
    void operator()() const noexcept;
  };
  std::atomic<watch_state> state_{watch_state::watching};
  // Destroyed before the connection closes `fd`: the callback then has run to its end or never runs.
  std::optional<std::stop_callback<shut_down>> on_stop_;
};

// The semaphore of a SQL backend: its waiting acquire is the core's polling, within the deadline
// whatever the server does (wait_out_outages).
class deadline_semaphore : public semaphore {
 protected:
  using semaphore::semaphore;
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec, [&](clock::time_point d, std::error_code& e) {
      return semaphore::do_acquire_until(permits, d, e);
    });
  }
};

}  // namespace dlock::sql
