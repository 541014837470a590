#pragma once
// The caller's deadline inside an acquire of a SQL backend: whatever the server does (refuses,
// accepts and never answers, answers slowly), a waiting acquire (try_acquire_until/_for, the rw
// lock's and the semaphore's) ends by its deadline plus deadline_grace.
//
//  * deadline_scope: a backend's do_acquire_until sets the deadline for its thread; the pool
//    (connecting, waiting for a connection) and every statement below it read it.
//  * connecting inside the scope takes at most until io_deadline() (the connect timeout is cut
//    to what is left of it); a statement that has not answered by then has its socket shut down
//    (socket_guard), so it fails at once as a lost connection, and the connection is dropped.
//  * wait_out_outages: errc::backend_unavailable before the deadline is waited out inside the
//    backend, with backoff, until the deadline: the core would otherwise make its one last attempt
//    outside the scope, bounded only by connect_timeout.
// Outside a scope (a plain try_acquire, dlock::open) nothing changes: connecting is bounded by the
// URI's connect_timeout.
#include <chrono>
#include <memory>
#include <system_error>
#include <thread>

#include "dlock/lock_options.hpp"
#include "dlock/spi.hpp"

namespace dlock::sql {

using steady_clock = std::chrono::steady_clock;

// How far past the caller's deadline an acquire may run: the answer to a statement sent just
// before it (a wait bounded by the deadline ends there on the server, and then answers), a
// connect begun just before it.
inline constexpr std::chrono::milliseconds deadline_grace{1000};

class deadline_scope {
 public:
  explicit deadline_scope(steady_clock::time_point deadline) noexcept;
  ~deadline_scope();
  deadline_scope(const deadline_scope&) = delete;
  deadline_scope& operator=(const deadline_scope&) = delete;

 private:
  steady_clock::time_point previous_;
};

// The deadline of the acquire this thread runs; time_point::max() outside a scope.
steady_clock::time_point current_deadline() noexcept;
// current_deadline() + deadline_grace (time_point::max() outside a scope): no I/O of the acquire
// blocks past it.
steady_clock::time_point io_deadline() noexcept;

// While alive, and inside a deadline scope: `fd` is shut down (shutdown(2), never closed) if the
// guard still lives at io_deadline(), so a statement stuck on it returns. Outside a scope, or for
// fd < 0, it does nothing. Destroying it before the deadline disarms it for good.
class socket_guard {
 public:
  explicit socket_guard(int fd) noexcept;
  ~socket_guard();
  socket_guard(const socket_guard&) = delete;
  socket_guard& operator=(const socket_guard&) = delete;
  // Whether it shut the socket down (the statement's failure is the deadline's).
  bool fired() const noexcept;

 private:
  std::uint64_t id_ = 0;
};

// Runs `wait(deadline, ec)` (a backend's wait, in a deadline scope) and, while it fails with
// errc::backend_unavailable before the deadline, sleeps with the options' backoff (never past the
// deadline) and runs it again; at the deadline it runs it once more (the core's last attempt),
// then returns whatever that gave.
template <class Wait>
std::unique_ptr<spi::lease_state> wait_out_outages(steady_clock::time_point deadline, const backoff_policy& poll,
                                                   std::error_code& ec, Wait&& wait) noexcept {
  deadline_scope scope(deadline);
  for (unsigned attempt = 0;; ++attempt) {
    ec.clear();
    auto state = wait(deadline, ec);
    if (state || ec != make_error_code(errc::backend_unavailable)) return state;
    const auto now = steady_clock::now();
    if (now >= deadline) return state;
    const auto delay = spi::backoff_delay(poll, attempt);
    if (deadline - now <= delay)
      std::this_thread::sleep_until(deadline);
    else
      std::this_thread::sleep_for(delay);
  }
}

}  // namespace dlock::sql
