#pragma once
// observer: what a backend's locks do, told as it happens, for metrics and logs. Set one per
// backend (backend::set_observer, or the third argument of dlock::open); dlock::prometheus fills a
// Prometheus registry from one. Unset, it costs one relaxed atomic load per acquire.
//
//   struct slow_waits : dlock::observer {
//     void on_acquire(const dlock::acquire_event& e) noexcept override {
//       if (e.waited > 1s) log("waited ", e.waited, " for ", e.lock.name);
//     }
//   };
//   backend->set_observer(std::make_shared<slow_waits>());
//
// Calls come from the thread that acquires or releases, and from the watchdog's and the backends'
// own threads (renewals, losses), concurrently: an observer must be thread-safe, and quick, as it
// runs on the lock's path. Its functions are noexcept: an observer that throws ends the program.
// The string views of an event live only for the call.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace dlock {

// Which primitive an event concerns: a mutex (distributed_lock), either side of a reader-writer
// lock, or a semaphore.
enum class primitive_kind : std::uint8_t { mutex, read, write, semaphore };
std::string_view to_string(primitive_kind kind) noexcept;  // "mutex", "read", "write", "semaphore"

// The lock an event concerns.
struct observed_lock {
  std::string_view backend;  // the scheme it was opened with: "redis", "postgres+advisory", ...
  primitive_kind primitive = primitive_kind::mutex;
  std::string_view name;
};

enum class acquire_outcome : std::uint8_t {
  granted,
  timed_out,  // still held by someone else at the deadline; a try (deadline now) that found it held
  cancelled,  // a stop request ended the wait (std::errc::operation_canceled)
  error,      // any other failure: `error` says which
};
std::string_view to_string(acquire_outcome outcome) noexcept;  // "granted", "timed_out", "cancelled", "error"

// One acquire call of any form (try, until, for, acquire), when it returns.
struct acquire_event {
  observed_lock lock;
  acquire_outcome outcome = acquire_outcome::granted;
  std::chrono::nanoseconds waited{};  // from the call to its return
  std::uint32_t permits = 1;          // a semaphore's permits asked for; 1 for the locks
  std::error_code error;              // set for cancelled and error
};

// A grant's release (explicit, or by the lease's destructor), once per grant.
struct release_event {
  observed_lock lock;
  std::chrono::nanoseconds held{};  // from the grant to the release
  std::error_code error;            // errc::not_owner: the lock was no longer ours (see on_lost)
};

// One renewal of a grant's ttl (by the watchdog or lease::renew).
struct renewal_event {
  observed_lock lock;
  bool renewed = true;
  // Renewed: the validity the grant had left when the renewal succeeded (how close it came to
  // being lost). Failed: the validity left at the failure, zero when none.
  std::chrono::nanoseconds margin{};
  std::error_code error;  // why it failed
};

// A grant lost before its release, once per grant: its validity ran out unrenewed, a renewal
// found it gone, its session died, or its release found it no longer ours.
struct loss_event {
  observed_lock lock;
  std::error_code reason;  // errc::lock_lost or errc::not_owner
};

// The number of acquires waiting on a backend changed: a waiting acquire (a deadline in the
// future) began or ended, granted or not.
struct waiters_event {
  observed_lock lock;
  int change = 0;           // +1 or -1
  std::size_t waiting = 0;  // this backend's waiting acquires of this primitive kind, after the change
};

class observer {
 public:
  virtual ~observer() = default;
  virtual void on_acquire(const acquire_event& event) noexcept;
  virtual void on_release(const release_event& event) noexcept;
  virtual void on_renewal(const renewal_event& event) noexcept;
  virtual void on_lost(const loss_event& event) noexcept;
  virtual void on_waiters(const waiters_event& event) noexcept;

 protected:
  observer() = default;
  observer(const observer&) = default;
  observer& operator=(const observer&) = default;
};

}  // namespace dlock
