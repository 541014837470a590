#pragma once
// distributed_lock: one named lock on one backend. A non-virtual public API over a two-function
// SPI (spdlog's log -> sink_it_ split): argument checks, deadlines, polling with backoff, the
// watchdog and error translation live here once; a backend implements one attempt, and overrides
// the wait only where its server queues waiters.
//
// Identity: a lock object is one owner (lock_options::owner). With a reentrant backend, acquiring
// again through the same object while it holds succeeds; through another object it does not.
#include <chrono>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/capabilities.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock_options.hpp"

namespace dlock {

namespace spi {
class lease_state;
class release_watch;
}  // namespace spi
namespace detail {
class local_wait_queue;
class observation_point;
}  // namespace detail
class backend;

class distributed_lock {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~distributed_lock();
  distributed_lock(const distributed_lock&) = delete;
  distributed_lock& operator=(const distributed_lock&) = delete;

  std::string_view name() const noexcept { return name_; }
  capabilities caps() const noexcept { return caps_; }
  const lock_options& options() const noexcept { return options_; }
  // Identifies this process's line of waiters for the name: shared by the locks of one name that one
  // backend object made, this lock itself otherwise. For adapters that queue waiters (dlock/asio.hpp).
  const void* waiting_line() const noexcept { return line_ ? static_cast<const void*>(line_.get()) : this; }
  const std::string& owner() const noexcept { return options_.owner; }

  // Every form below returns a lease only with validity left: a grant that arrives already
  // expired (the server stalled while replying) is given back, never returned.

  // Exactly one attempt. Empty lease: held by someone else.
  [[nodiscard]] lease try_acquire();
  [[nodiscard]] lease try_acquire(std::error_code& ec) noexcept;

  // Waits until the deadline (steady clock). Empty lease: still held by someone else then.
  // An unreachable server (errc::backend_unavailable: a restart, a failover, a dropped link) is
  // waited out like contention, with backoff, and reported only if it lasts past the deadline.
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline);
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept;

  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return try_acquire_until(deadline_after(timeout));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::error_code& ec) noexcept {
    return try_acquire_until(deadline_after(timeout), ec);
  }

  // Waits as long as it takes, server outages included. Never returns an empty lease.
  [[nodiscard]] lease acquire();
  [[nodiscard]] lease acquire(std::error_code& ec) noexcept;

  // The waiting forms, which a stop request on `stop` also ends: an empty lease and
  // std::errc::operation_canceled (thrown as std::system_error by the forms without `ec`), soon
  // after the request whatever the backend waits on. Nothing is left behind: the backend takes
  // its waiter entry off the server as at a deadline, and a grant that crossed the request on the
  // wire is released at once, so the next contender does not wait for a ttl.
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::stop_token stop);
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::stop_token stop, std::error_code& ec) noexcept;
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop) {
    return try_acquire_until(deadline_after(timeout), std::move(stop));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                      std::error_code& ec) noexcept {
    return try_acquire_until(deadline_after(timeout), std::move(stop), ec);
  }
  [[nodiscard]] lease acquire(std::stop_token stop);
  [[nodiscard]] lease acquire(std::stop_token stop, std::error_code& ec) noexcept;

  // now + timeout, saturating instead of overflowing for huge timeouts (duration::max()).
  template <class Rep, class Period>
  static clock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout) noexcept {
    const auto now = clock::now();
    if (timeout <= timeout.zero()) return now;
    using long_seconds = std::chrono::duration<long double>;
    if (std::chrono::duration_cast<long_seconds>(timeout) >=
        std::chrono::duration_cast<long_seconds>(clock::time_point::max() - now))
      return clock::time_point::max();
    return now + std::chrono::ceil<clock::duration>(timeout);
  }

 protected:
  // `options.owner` must be set (backend::make_lock fills it in).
  distributed_lock(std::string name, capabilities caps, lock_options options);

  // SPI. One attempt: nullptr with !ec means "held by someone else". Never throws.
  virtual std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept = 0;

  // Override only where the server queues waiters (capability::blocking). deadline may be
  // time_point::max(). Return nullptr with !ec when the deadline passed. A stop request
  // (spi::stop_requested(), dlock/acquire_stop.hpp) ends the wait as the deadline does: sleep
  // with spi::sleep_until or spi::wait_until, which it wakes. Default: the fair
  // hand-off of this process (the waiters for this name through this lock's backend object stand
  // in a FIFO line; only the head asks the server, a release here wakes it at once, a newcomer
  // joins the tail), the head polling do_try_acquire with jittered exponential backoff
  // (options().poll) or sleeping on do_watch_release's watch; the head always makes one last
  // attempt at its deadline (DistributedLock's rule), a waiter behind it leaves the line then.
  virtual std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept;

  // For the default do_acquire_until: a watch on which the head of the line sleeps until the lock
  // may have been freed, instead of polling (file://). Called after an attempt of the head found
  // the lock held; the head then tries once more through the watch before sleeping, so a release
  // in between is not missed. Default nullptr: poll with backoff.
  virtual std::unique_ptr<spi::release_watch> do_watch_release() noexcept;

  // Optional: one attempt at a whole set of names in one round trip (capability::atomic_set where
  // every set can be taken so).
  // `set` holds the locks of one multi_lock in its canonical order, this lock first, each made by
  // the backend object that made this one. Either every member is granted (their states, in the
  // order of `set`) or none is: an empty vector with !ec means a member was held by someone else
  // and nothing was taken; errc::not_supported means this set cannot be taken in one step here
  // (multi_lock then takes it member by member). Default: not supported.
  virtual std::vector<std::unique_ptr<spi::lease_state>> do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                            std::error_code& ec) noexcept;

 private:
  // The loop every acquire form shares (deadline == now: one attempt): refuses expired grants and
  // waits out errc::backend_unavailable until the deadline.
  std::unique_ptr<spi::lease_state> acquire_within(clock::time_point deadline, const std::stop_token& stop,
                                                   std::error_code& ec) noexcept;
  lease adopt(std::unique_ptr<spi::lease_state> state) noexcept;
  // The default do_acquire_until without a line (a lock object not made by a backend).
  std::unique_ptr<spi::lease_state> poll_until(clock::time_point deadline, std::error_code& ec) noexcept;
  // A try must not overtake this process's waiters (except a reentrant owner's re-entry).
  bool must_wait_in_line() const;
  // The grant reports its release to the line.
  void hold_in_line(spi::lease_state& state) noexcept;
  // A member's grant from a set taken in one step, handed out as this lock's own would be.
  lease adopt_set_member(std::unique_ptr<spi::lease_state> state) noexcept;

  friend class backend;     // gives the lock its name's line and its observer (backend::make_lock)
  friend class multi_lock;  // takes a set in one step and hands out its grants through the members

  std::string name_;
  capabilities caps_;
  lock_options options_;
  // The line of this name in the backend object that made the lock; nullptr otherwise.
  std::shared_ptr<detail::local_wait_queue> line_;
  // The observer of the backend object that made the lock (dlock/observer.hpp); nullptr otherwise.
  std::shared_ptr<detail::observation_point> observation_;
};

}  // namespace dlock
