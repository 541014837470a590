#pragma once
// dlock::detail::timed_mutex and shared_timed_mutex: the interfaces of std::timed_mutex and
// std::shared_timed_mutex for steady_clock deadlines (the only clock dlock waits on), built on a
// std::mutex and std::condition_variable.
//
// Why not the standard ones: libstdc++ waits for a steady deadline of theirs in glibc's
// pthread_mutex_clocklock and pthread_rwlock_clock{rd,wr}lock, which ThreadSanitizer (Clang 14's
// run-time) does not intercept. It then never sees those locks taken: it reports their unlock as
// "unlock of an unlocked mutex" and misses the order they give between threads (false data races).
// A std::mutex and a condition variable's steady wait (pthread_cond_clockwait) it does see, so the
// code dlock's locks protect is checked as it runs.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace dlock::detail {

class timed_mutex {
 public:
  timed_mutex() = default;
  timed_mutex(const timed_mutex&) = delete;
  timed_mutex& operator=(const timed_mutex&) = delete;
  ~timed_mutex() = default;

  void lock() {
    std::unique_lock lk(m_);
    freed_.wait(lk, [this] { return !locked_; });
    locked_ = true;
  }

  // Never fails spuriously: the inner mutex is only ever held for a few instructions.
  bool try_lock() {
    const std::lock_guard lk(m_);
    if (locked_) return false;
    locked_ = true;
    return true;
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(timeout));
  }

  template <class Duration>
  bool try_lock_until(const std::chrono::time_point<std::chrono::steady_clock, Duration>& deadline) {
    std::unique_lock lk(m_);
    if (!freed_.wait_until(lk, deadline, [this] { return !locked_; })) return false;
    locked_ = true;
    return true;
  }

  // Notifies under the inner mutex: the thread it wakes may destroy this object as soon as it
  // has the lock (the last user of a session unlocks, then drops it).
  void unlock() {
    const std::lock_guard lk(m_);
    locked_ = false;
    freed_.notify_one();
  }

 private:
  std::mutex m_;
  std::condition_variable freed_;
  bool locked_ = false;
};

// Readers are preferred, as with libstdc++'s std::shared_timed_mutex (a pthread_rwlock): a reader
// gets in whenever no writer holds it, even while a writer waits.
class shared_timed_mutex {
 public:
  shared_timed_mutex() = default;
  shared_timed_mutex(const shared_timed_mutex&) = delete;
  shared_timed_mutex& operator=(const shared_timed_mutex&) = delete;
  ~shared_timed_mutex() = default;

  void lock() {
    std::unique_lock lk(m_);
    changed_.wait(lk, [this] { return free(); });
    writer_ = true;
  }

  bool try_lock() {
    const std::lock_guard lk(m_);
    if (!free()) return false;
    writer_ = true;
    return true;
  }

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(timeout));
  }

  template <class Duration>
  bool try_lock_until(const std::chrono::time_point<std::chrono::steady_clock, Duration>& deadline) {
    std::unique_lock lk(m_);
    if (!changed_.wait_until(lk, deadline, [this] { return free(); })) return false;
    writer_ = true;
    return true;
  }

  // Wakes every waiter, readers and writers: all the readers may come in together.
  void unlock() {
    const std::lock_guard lk(m_);
    writer_ = false;
    changed_.notify_all();
  }

  void lock_shared() {
    std::unique_lock lk(m_);
    changed_.wait(lk, [this] { return !writer_; });
    ++readers_;
  }

  bool try_lock_shared() {
    const std::lock_guard lk(m_);
    if (writer_) return false;
    ++readers_;
    return true;
  }

  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_shared_until(std::chrono::steady_clock::now() +
                                 std::chrono::ceil<std::chrono::nanoseconds>(timeout));
  }

  template <class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<std::chrono::steady_clock, Duration>& deadline) {
    std::unique_lock lk(m_);
    if (!changed_.wait_until(lk, deadline, [this] { return !writer_; })) return false;
    ++readers_;
    return true;
  }

  // Only writers wait for the readers to leave; the last one out lets them try.
  void unlock_shared() {
    const std::lock_guard lk(m_);
    if (--readers_ == 0) changed_.notify_all();
  }

 private:
  bool free() const noexcept { return !writer_ && readers_ == 0; }

  std::mutex m_;
  std::condition_variable changed_;
  bool writer_ = false;
  std::size_t readers_ = 0;
};

}  // namespace dlock::detail
