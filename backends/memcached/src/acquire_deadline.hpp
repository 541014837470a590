#pragma once
// The caller's deadline inside a memcached:// acquire: a waiting acquire (try_acquire_until/_for,
// the semaphore's) ends by its deadline plus deadline_grace whatever the servers do (refuse,
// accept and never answer, answer slowly).
//  * deadline_scope: the lock's and the semaphore's do_acquire_until set it for their thread; each
//    command of an attempt then runs with libmemcached's connect and poll timeouts cut to what is
//    left until deadline + grace (io_bound), and borrowing a handle waits no longer either.
//  * wait_out_outages: errc::backend_unavailable before the deadline is waited out here, with
//    backoff, until the deadline (the core would otherwise make its last attempt outside the
//    scope, with the URI's full timeouts).
// The SQL backends do the same for their connections (backends/sql_common: dlock_sql/deadline.hpp).
#include <libmemcached/memcached.h>

#include <chrono>
#include <memory>
#include <system_error>
#include <thread>

#include "dlock/lock_options.hpp"
#include "dlock/spi.hpp"

namespace dlock::memcached {

using steady_clock = std::chrono::steady_clock;

// How far past the caller's deadline an acquire may run: a command sent just before it.
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

// deadline + grace of the acquire this thread runs; time_point::max() outside a scope.
steady_clock::time_point io_deadline() noexcept;

// A handle's timeouts for the commands of one attempt: each refresh() (and the constructor) cuts
// the connect and poll timeouts to what is left until io_deadline() (at least 1 ms), never above
// the configured ones, which the destructor puts back. Outside a scope it changes nothing.
class io_bound {
 public:
  io_bound(memcached_st* m, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout) noexcept;
  ~io_bound();
  io_bound(const io_bound&) = delete;
  io_bound& operator=(const io_bound&) = delete;
  void refresh() noexcept;

 private:
  memcached_st* m_;
  std::chrono::milliseconds connect_timeout_, io_timeout_;
  bool bounded_;
};

// Runs `wait(deadline, ec)` in a deadline scope; while it fails with errc::backend_unavailable
// before the deadline, sleeps with the options' backoff (never past the deadline) and runs it
// again; at the deadline it runs once more (the core's last attempt) and returns what that gave.
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

}  // namespace dlock::memcached
