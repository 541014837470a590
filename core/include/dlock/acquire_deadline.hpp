#pragma once
// The caller's deadline inside a backend's acquire, for backends whose client library blocks on
// its own timeouts: a waiting acquire (try_acquire_until/_for, the reader-writer lock's and the
// semaphore's) ends by its deadline plus deadline_grace whatever the server does (refuses, accepts
// and never answers, answers slowly).
//  * deadline_scope: the backend's do_acquire_until sets the deadline for its thread; whatever
//    blocks below it (connecting, waiting for a pooled connection, a command) reads io_deadline()
//    and cuts its own timeouts to what is left.
//  * wait_out_outages: errc::backend_unavailable before the deadline is waited out inside the
//    backend, with backoff, until the deadline: the core would otherwise make its last attempt
//    outside the scope, bounded only by the URI's timeouts.
// Outside a scope (a plain try_acquire, dlock::open) nothing changes.
#include <chrono>
#include <memory>
#include <system_error>

#include "dlock/acquire_stop.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/spi.hpp"

namespace dlock::spi {

// How far past the caller's deadline an acquire may run: the answer to a command sent just before
// it (a wait bounded by the deadline ends there on the server, and then answers), a connect begun
// just before it.
inline constexpr std::chrono::milliseconds deadline_grace{1000};

class deadline_scope {
 public:
  explicit deadline_scope(std::chrono::steady_clock::time_point deadline) noexcept;
  ~deadline_scope();
  deadline_scope(const deadline_scope&) = delete;
  deadline_scope& operator=(const deadline_scope&) = delete;

 private:
  std::chrono::steady_clock::time_point previous_;
};

// The deadline of the acquire this thread runs; time_point::max() outside a scope.
std::chrono::steady_clock::time_point current_deadline() noexcept;
// current_deadline() + deadline_grace (time_point::max() outside a scope): no I/O of the acquire
// blocks past it.
std::chrono::steady_clock::time_point io_deadline() noexcept;

// Runs `wait(deadline, ec)` (the backend's wait) in a deadline scope and, while it fails with
// errc::backend_unavailable before the deadline, sleeps with the options' backoff (never past the
// deadline; a stop request ends the sleep and the wait) and runs it again; at the deadline it runs
// it once more (the core's last attempt), then returns whatever that gave.
template <class Wait>
std::unique_ptr<lease_state> wait_out_outages(std::chrono::steady_clock::time_point deadline,
                                              const backoff_policy& poll, std::error_code& ec, Wait&& wait) noexcept {
  deadline_scope scope(deadline);
  for (unsigned attempt = 0;; ++attempt) {
    ec.clear();
    auto state = wait(deadline, ec);
    if (state || ec != make_error_code(errc::backend_unavailable)) return state;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return state;
    const auto delay = backoff_delay(poll, attempt);
    if (!sleep_until(deadline - now <= delay ? deadline : now + delay)) return state;  // a stop request
  }
}

}  // namespace dlock::spi
