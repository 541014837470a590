#pragma once
// shared_timed_lockable: a distributed reader-writer lock as a standard SharedTimedLockable, so
// std::shared_lock works on the reader side and std::unique_lock (std::scoped_lock,
// std::lock_guard) on the writer side, as with a std::shared_timed_mutex shared by threads AND
// processes.
//
// A rw_lock object is ONE owner, so the threads of one process first take a local shared timed
// mutex (dlock/detail/timed_mutex.hpp) in the same mode and with the same deadline (as
// timed_lockable takes a local mutex): a writer thread excludes this process's readers locally
// before it asks the server, and the readers of this process share the local side. Each reader
// thread then holds a read lease of its own on the server (they come and go independently);
// unlock_shared finds the calling thread's lease by thread id, so a thread must unlock_shared what
// it locked (as a std::shared_timed_mutex requires). The rw_lock object is used by several threads
// at once on the reader side: its acquire forms must be safe to call concurrently (they are: each
// grant is a lease of its own).
//
// As with std::shared_timed_mutex, a thread must not take the shared side twice: on a backend
// whose writers are preferred (writer_preferred), its second read queues behind a writer that
// waits for its first. Between the threads of one process the local side prefers readers (a
// reader gets in whenever no writer holds it), whatever the backend prefers between processes.
//
//   dlock::shared_timed_lockable catalog(backend->make_rw_lock("catalog"));
//   { std::shared_lock reading(catalog); ...read... }               // many threads, many processes
//   if (std::unique_lock writing(catalog, std::chrono::seconds(2)); writing) { ...write... }
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock/detail/timed_mutex.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/rw_lock.hpp"

namespace dlock {

class shared_timed_lockable {
 public:
  using steady = std::chrono::steady_clock;

  // Borrows `lock`, which must outlive this object.
  explicit shared_timed_lockable(rw_lock& lock) noexcept : lock_(&lock) {}
  explicit shared_timed_lockable(std::unique_ptr<rw_lock> lock) : owned_(std::move(lock)), lock_(owned_.get()) {
    if (!lock_) throw error(errc::invalid_argument, "shared_timed_lockable needs a rw_lock, got a null unique_ptr");
  }
  shared_timed_lockable(const shared_timed_lockable&) = delete;
  shared_timed_lockable& operator=(const shared_timed_lockable&) = delete;
  ~shared_timed_lockable() = default;  // leases still held are released by their own destructors

  // ---- the writer side (std::unique_lock) ----

  // Waits as long as it takes. Throws dlock::error on a backend failure (then nothing is held).
  void lock() {
    local_.lock();
    take_write([&] { return lock_->acquire_write(); });
  }
  // One attempt: false when a thread of this process or another owner holds either side.
  bool try_lock() {
    if (!local_.try_lock()) return false;
    return take_write([&] { return lock_->try_acquire_write(); });
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return until(distributed_lock::deadline_after(timeout),
                 [this](steady::time_point d) { return try_lock_until_steady(d); });
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return until(deadline, [this](steady::time_point d) { return try_lock_until_steady(d); });
  }
  // Never throws (~unique_lock calls it). A release that finds the grant no longer ours
  // (not_owner) is reported through dlock::report_background_error: the work was not protected.
  void unlock() noexcept {
    if (!written_) {
      report_background_error(
          make_error_code(errc::invalid_argument),
          "shared_timed_lockable::unlock on rw lock '" + std::string(lock_->name()) + "' whose write side is not held");
      return;
    }
    lease releasing = std::move(written_);
    release_reporting(releasing, "write");
    local_.unlock();
  }

  // ---- the reader side (std::shared_lock) ----

  void lock_shared() {
    local_.lock_shared();
    take_read([&] { return lock_->acquire_read(); });
  }
  // One attempt: false when a writer (a thread of this process or another owner) holds or, where
  // the backend prefers writers, waits for it.
  bool try_lock_shared() {
    if (!local_.try_lock_shared()) return false;
    return take_read([&] { return lock_->try_acquire_read(); });
  }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return until(distributed_lock::deadline_after(timeout),
                 [this](steady::time_point d) { return try_lock_shared_until_steady(d); });
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return until(deadline, [this](steady::time_point d) { return try_lock_shared_until_steady(d); });
  }
  // Never throws (~shared_lock calls it). Releases the calling thread's read lease (the latest,
  // should it hold several); a failed release is reported as unlock's is.
  void unlock_shared() noexcept {
    lease releasing;
    {
      const std::lock_guard guard(readers_mutex_);
      const auto it = readers_.find(std::this_thread::get_id());
      if (it != readers_.end()) {
        releasing = std::move(it->second.back());
        it->second.pop_back();
        if (it->second.empty()) readers_.erase(it);
      }
    }
    if (!releasing) {
      report_background_error(make_error_code(errc::invalid_argument),
                              "shared_timed_lockable::unlock_shared on rw lock '" + std::string(lock_->name()) +
                                  "' by a thread that holds no read lease");
      return;
    }
    release_reporting(releasing, "read");
    local_.unlock_shared();
  }

  // ---- what the holder may want to know ----

  // While the calling thread holds the write side: the current grant.
  const lease& current_lease() const noexcept { return written_; }
  std::optional<std::uint64_t> fencing_token() const noexcept { return written_.fencing_token(); }
  std::stop_token lost_token() const noexcept { return written_.lost_token(); }
  // The calling thread's (latest) read lease: its fencing token and lost signal; nullopt / a
  // token that never fires when the thread holds no read lease.
  std::optional<std::uint64_t> shared_fencing_token() const {
    const std::lock_guard guard(readers_mutex_);
    const auto it = readers_.find(std::this_thread::get_id());
    return it == readers_.end() ? std::nullopt : it->second.back().fencing_token();
  }
  std::stop_token shared_lost_token() const {
    const std::lock_guard guard(readers_mutex_);
    const auto it = readers_.find(std::this_thread::get_id());
    return it == readers_.end() ? std::stop_token{} : it->second.back().lost_token();
  }
  rw_lock& lock_object() const noexcept { return *lock_; }

 private:
  // Any clock, as timed_lockable: a non-steady deadline is converted, and checked again on its
  // own clock afterwards, in case that clock was set back while we waited.
  template <class Clock, class Duration, class TryUntil>
  static bool until(const std::chrono::time_point<Clock, Duration>& deadline, TryUntil&& try_until) {
    if constexpr (std::is_same_v<Clock, steady>) {
      return try_until(std::chrono::ceil<steady::duration>(deadline));
    } else {
      auto now = Clock::now();
      do {
        if (try_until(distributed_lock::deadline_after(deadline - now))) return true;
        now = Clock::now();
      } while (now < deadline);
      return false;
    }
  }

  bool try_lock_until_steady(steady::time_point deadline) {
    if (!local_.try_lock_until(deadline)) return false;
    return take_write([&] { return lock_->try_acquire_write_until(deadline); });
  }
  bool try_lock_shared_until_steady(steady::time_point deadline) {
    if (!local_.try_lock_shared_until(deadline)) return false;
    return take_read([&] { return lock_->try_acquire_read_until(deadline); });
  }

  // The local side is held exclusively; take the write side or give the local side back.
  template <class Acquire>
  bool take_write(Acquire&& acquire) {
    try {
      lease l = acquire();
      if (!l) {
        local_.unlock();
        return false;
      }
      written_ = std::move(l);
      return true;
    } catch (...) {
      local_.unlock();
      throw;
    }
  }

  // The local side is held shared; take a read lease for this thread or give the local side back.
  template <class Acquire>
  bool take_read(Acquire&& acquire) {
    try {
      lease l = acquire();
      if (!l) {
        local_.unlock_shared();
        return false;
      }
      const std::lock_guard guard(readers_mutex_);
      readers_[std::this_thread::get_id()].push_back(std::move(l));
      return true;
    } catch (...) {
      local_.unlock_shared();
      throw;
    }
  }

  void release_reporting(lease& releasing, const char* side) noexcept {
    std::error_code ec;
    releasing.release(ec);
    if (ec)
      report_background_error(ec, std::string("releasing the ") + side + " side of rw lock '" +
                                      std::string(lock_->name()) + "': " + last_error_message());
  }

  std::unique_ptr<rw_lock> owned_;
  rw_lock* lock_;
  detail::shared_timed_mutex local_;
  lease written_;  // the write lease, while a thread holds the write side
  mutable std::mutex readers_mutex_;
  std::unordered_map<std::thread::id, std::vector<lease>> readers_;  // each reader thread's leases
};

}  // namespace dlock
