#pragma once
// counting_semaphore: a distributed semaphore in the style of std::counting_semaphore (acquire,
// try_acquire, try_acquire_for, try_acquire_until, release), one permit per acquire, shared by the
// threads of this process and by every process using the same name and max_count.
//
//   dlock::counting_semaphore api_slots(backend->make_semaphore("rate-limited-api", 3));
//   api_slots.acquire();   // at most 3 holders over every process
//   ...call the API...
//   api_slots.release();
//
// std::counting_semaphore's release is not tied to the thread (or the acquire) that took the
// permit: any thread may release, and release(n) gives back n permits. Here every permit is a
// lease of its own on the server, so this object keeps the leases its acquires took in a FIFO, and
// release(n) gives back the n OLDEST of them, whichever thread took them. The consequence to know:
// the permit a thread gives back may not be the one it took, so per-permit things (a fencing
// token, a lost signal) belong to whoever holds the oldest lease; use dlock::semaphore's leases
// directly when a permit's identity matters. Releasing more than this object holds is refused
// (errc::invalid_argument, nothing released): only this process's own permits can be given back.
//
// The threads of this process need no local gate, unlike timed_lockable: each acquire is a grant
// of its own, so N threads of one process hold N permits as N processes would.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "dlock/diagnostics.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

class counting_semaphore {
 public:
  using steady = std::chrono::steady_clock;

  // Borrows `sem`, which must outlive this object.
  explicit counting_semaphore(semaphore& sem) noexcept : sem_(&sem) {}
  explicit counting_semaphore(std::unique_ptr<semaphore> sem) : owned_(std::move(sem)), sem_(owned_.get()) {
    if (!sem_) throw error(errc::invalid_argument, "counting_semaphore needs a semaphore, got a null unique_ptr");
  }
  counting_semaphore(const counting_semaphore&) = delete;
  counting_semaphore& operator=(const counting_semaphore&) = delete;
  ~counting_semaphore() = default;  // permits still held are released by their leases' destructors

  // The semaphore's max_count (std::counting_semaphore::max() is a compile-time constant; this
  // one is the name's, the same in every process).
  std::ptrdiff_t max() const noexcept { return static_cast<std::ptrdiff_t>(sem_->max_count()); }

  // Waits as long as it takes for one permit. Throws dlock::error on a backend failure.
  void acquire() { keep(sem_->acquire()); }
  // One attempt: false when every permit is held.
  bool try_acquire() { return keep(sem_->try_acquire()); }
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_acquire_until_steady(distributed_lock::deadline_after(timeout));
  }
  // Any clock, as timed_lockable: a non-steady deadline is converted, and checked again on its own
  // clock afterwards, in case that clock was set back while we waited.
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    if constexpr (std::is_same_v<Clock, steady>) {
      return try_acquire_until_steady(std::chrono::ceil<steady::duration>(deadline));
    } else {
      auto now = Clock::now();
      do {
        if (try_acquire_until_steady(distributed_lock::deadline_after(deadline - now))) return true;
        now = Clock::now();
      } while (now < deadline);
      return false;
    }
  }

  // Gives back the `update` oldest permits this object holds. Throws dlock::error(invalid_argument)
  // when update < 0 or exceeds what it holds (then nothing is released). A permit found no longer
  // ours (not_owner: it expired and went to someone else) is reported through
  // dlock::report_background_error, as timed_lockable::unlock does, and the others are still
  // released.
  void release(std::ptrdiff_t update = 1) {
    std::deque<lease> releasing;
    {
      const std::lock_guard guard(mutex_);
      if (update < 0 || static_cast<std::size_t>(update) > held_.size())
        throw error(errc::invalid_argument, "counting_semaphore::release(" + std::to_string(update) +
                                                ") on semaphore '" + std::string(sem_->name()) + "' that holds " +
                                                std::to_string(held_.size()) + " permit(s) here");
      for (std::ptrdiff_t i = 0; i < update; ++i) {
        releasing.push_back(std::move(held_.front()));
        held_.pop_front();
      }
    }
    for (auto& l : releasing) {
      std::error_code ec;
      l.release(ec);
      if (ec)
        report_background_error(
            ec, "releasing a permit of semaphore '" + std::string(sem_->name()) + "': " + last_error_message());
    }
  }

  // How many permits this object (this process, through it) holds now.
  std::size_t held_here() const {
    const std::lock_guard guard(mutex_);
    return held_.size();
  }
  // The fencing token of the permit release() gives back next (the oldest held here); nullopt when
  // none is held here or the backend has no fencing.
  std::optional<std::uint64_t> oldest_fencing_token() const {
    const std::lock_guard guard(mutex_);
    return held_.empty() ? std::nullopt : held_.front().fencing_token();
  }
  semaphore& semaphore_object() const noexcept { return *sem_; }

 private:
  bool try_acquire_until_steady(steady::time_point deadline) { return keep(sem_->try_acquire_until(deadline)); }

  bool keep(lease l) {
    if (!l) return false;
    const std::lock_guard guard(mutex_);
    held_.push_back(std::move(l));
    return true;
  }

  std::unique_ptr<semaphore> owned_;
  semaphore* sem_;
  mutable std::mutex mutex_;
  std::deque<lease> held_;  // oldest first: release gives these back in acquisition order
};

}  // namespace dlock
