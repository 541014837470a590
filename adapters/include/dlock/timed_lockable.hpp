#pragma once
// timed_lockable: a distributed lock as a standard TimedLockable, so std::unique_lock,
// std::scoped_lock, std::lock_guard and std::condition_variable_any work with it.
//
// A lock object is ONE owner: with a reentrant backend, two threads locking the same object would
// both "get" it. So the threads of one process first take a local timed mutex
// (dlock/detail/timed_mutex.hpp, with the same deadline), and the object behaves like a
// std::timed_mutex shared by threads AND processes.
//
//   dlock::timed_lockable m(backend->make_lock("orders/42"));
//   if (std::unique_lock guard(m, std::chrono::seconds(2)); guard) { ... m.fencing_token() ... }
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>

#include "dlock/detail/timed_mutex.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"

namespace dlock {

class timed_lockable {
 public:
  using steady = std::chrono::steady_clock;

  // Borrows `lock`, which must outlive this object.
  explicit timed_lockable(distributed_lock& lock) noexcept : lock_(&lock) {}
  explicit timed_lockable(std::unique_ptr<distributed_lock> lock) : owned_(std::move(lock)), lock_(owned_.get()) {
    if (!lock_) throw error(errc::invalid_argument, "timed_lockable needs a lock, got a null unique_ptr");
  }
  timed_lockable(const timed_lockable&) = delete;
  timed_lockable& operator=(const timed_lockable&) = delete;
  ~timed_lockable() = default;  // a lease still held is released by its own destructor

  // Waits as long as it takes. Throws dlock::error on a backend failure (then nothing is held).
  void lock() {
    local_.lock();
    try {
      held_ = lock_->acquire();
    } catch (...) {
      local_.unlock();
      throw;
    }
  }

  // One attempt: false when another thread of this process or another owner holds it.
  bool try_lock() {
    if (!local_.try_lock()) return false;
    return take_remote([&] { return lock_->try_acquire(); });
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_until_steady(distributed_lock::deadline_after(timeout));
  }

  // Any clock. A non-steady clock (system_clock) is converted to a steady deadline and checked
  // again on its own clock afterwards, as the standard's timed mutexes do: if that clock was set
  // back while we waited, we keep trying until its deadline really passed.
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    if constexpr (std::is_same_v<Clock, steady>) {
      return try_lock_until_steady(std::chrono::ceil<steady::duration>(deadline));
    } else {
      auto now = Clock::now();
      do {
        if (try_lock_until_steady(distributed_lock::deadline_after(deadline - now))) return true;
        now = Clock::now();
      } while (now < deadline);
      return false;
    }
  }

  // Never throws (~unique_lock calls it). A release that finds the lock no longer ours
  // (not_owner: it expired and went to someone else) is reported through
  // dlock::report_background_error, because the work done under it was not protected.
  void unlock() noexcept {
    if (!held_) {
      report_background_error(make_error_code(errc::invalid_argument),
                              "timed_lockable::unlock on lock '" + std::string(lock_->name()) + "' that is not held");
      return;
    }
    lease releasing = std::move(held_);
    std::error_code ec;
    releasing.release(ec);
    if (ec) report_background_error(ec, "unlocking lock '" + std::string(lock_->name()) + "': " + last_error_message());
    local_.unlock();
  }

  // While held by the calling thread: the current grant.
  const lease& current_lease() const noexcept { return held_; }
  std::optional<std::uint64_t> fencing_token() const noexcept { return held_.fencing_token(); }
  std::stop_token lost_token() const noexcept { return held_.lost_token(); }
  distributed_lock& lock_object() const noexcept { return *lock_; }

 private:
  bool try_lock_until_steady(steady::time_point deadline) {
    if (!local_.try_lock_until(deadline)) return false;
    return take_remote([&] { return lock_->try_acquire_until(deadline); });
  }

  // The local mutex is held; take the distributed lock or give the local mutex back.
  template <class Acquire>
  bool take_remote(Acquire&& acquire) {
    try {
      lease l = acquire();
      if (!l) {
        local_.unlock();
        return false;
      }
      held_ = std::move(l);
      return true;
    } catch (...) {
      local_.unlock();
      throw;
    }
  }

  std::unique_ptr<distributed_lock> owned_;
  distributed_lock* lock_;
  detail::timed_mutex local_;
  lease held_;
};

}  // namespace dlock
