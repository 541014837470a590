#pragma once
// The engine under dlock::async_acquire (dlock/asio.hpp, dlock/boost_asio.hpp), free of Asio so
// both flavours share it. Pending acquires of one lock object (and access kind or permit count)
// form a line. The head's first try (one attempt) and every release run on a small pool of
// round-trip threads, so uncontended acquires of any number of names share a few threads. A head
// that must wait goes on in the line's own thread, which makes its blocking, stoppable acquire, so
// it is woken by the backend's own release event (pub/sub, watch, LISTEN, inotify, condition
// variable) exactly as a blocking waiter is; every other waiter of the line holds no thread. One
// timer thread ends the waits whose deadline comes while they are queued behind the head, or while
// their first try waits for a busy round-trip thread. A line's thread starts when a wait of it must
// wait, and leaves after it was idle for a while; so does a round-trip thread.
#include <dlock/lease.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <system_error>

namespace dlock::detail {

// What a finished wait hands to its operation: called once, on an engine thread.
class async_completion {
 public:
  virtual ~async_completion() = default;
  virtual void complete(std::error_code ec, lease granted) noexcept = 0;
};

// One blocking, stoppable acquire of the line's lock, up to a deadline (a past deadline makes one
// try). The grant that crosses a stop is released by the core, which then reports
// errc::operation_canceled.
using blocking_acquire = std::function<lease(std::chrono::steady_clock::time_point, std::stop_token, std::error_code&)>;

// Which line a wait joins: the lock object and what kind of grant (0 for a mutex, the access kind,
// or the permit count).
struct line_key {
  const void* object = nullptr;
  unsigned kind = 0;
  friend bool operator==(const line_key&, const line_key&) = default;
};

class async_wait;

// Cancels a pending wait: a queued wait completes at once with the cancellation error; the head's
// blocking acquire is stopped, and its grant, if one crosses the stop, is released. No effect once
// the wait has completed.
class async_wait_handle {
 public:
  async_wait_handle() = default;
  explicit async_wait_handle(std::shared_ptr<async_wait> wait) noexcept : wait_(std::move(wait)) {}
  void cancel() const noexcept;

 private:
  std::shared_ptr<async_wait> wait_;
};

// Queues a wait on the line of `key` (made on first use), which runs `acquire` for it when it is
// the head. `done` gets exactly one completion: a lease (empty at the deadline, as
// try_acquire_until), the backend's error, or `canceled_error()` after cancel().
async_wait_handle start_async_wait(line_key key, blocking_acquire acquire,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::unique_ptr<async_completion> done);

// What a finished release hands to its operation: called once, on an engine thread.
class release_completion {
 public:
  virtual ~release_completion() = default;
  virtual void complete(std::error_code ec) noexcept = 0;
};

// Releases `held` on the engine's pool of round-trip threads (at most `round_trip_threads`,
// started as needed and leaving once idle, whatever the number of waiters), so that the caller's thread, an
// io_context's, makes no round trip. `done` gets release(ec)'s result: nothing for an
// empty or released lease, not_owner when the lock was no longer this lease's.
void start_async_release(lease held, std::unique_ptr<release_completion> done);
// How many first tries and releases are in flight at once, each a blocking round trip: 64
// concurrent uncontended operations reached 0.56-0.70x the blocking API's throughput on redis and
// 0.70x on zookeeper with 4 (a Redis pipeline's batches and ZooKeeper's group commits stay small),
// 0.8-0.95x with 16. The threads start only when that many operations are in flight at once: 10,000 waiters
// of one name use 7 to 10 threads in all.
inline constexpr std::size_t round_trip_threads = 16;

// The error a canceled asynchronous operation completes with: ECANCELED in the system category, which
// is Asio's error::operation_aborted (standalone and Boost) and compares equal to
// std::errc::operation_canceled.
std::error_code canceled_error() noexcept;

// For tests and benchmarks: the threads the engine runs now (line threads, the timer thread and the
// round-trip threads).
std::size_t async_engine_threads() noexcept;

}  // namespace dlock::detail
