#pragma once
// How the core tells a backend's observer (dlock/observer.hpp) what its locks do: the backend's
// observation point, shared with every primitive it made; the probe around one acquire call; and
// what a grant carries to report its release, renewals and loss.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/observer.hpp"

namespace dlock::spi {
class lease_state;
}

namespace dlock::detail {

using clock = std::chrono::steady_clock;

// One backend's observer. Set and read under a mutex, but read only when `observed_` says one is
// set: a backend without an observer pays one relaxed load per acquire.
class observation_point {
 public:
  explicit observation_point(std::string backend_label);

  void set(std::shared_ptr<observer> target);
  std::shared_ptr<observer> current() const;  // nullptr when unset
  bool observed() const noexcept { return observed_.load(std::memory_order_relaxed); }
  const std::string& backend() const noexcept { return backend_; }
  // Adds `change` to the waiting acquires of `kind` and returns the count after it.
  std::size_t change_waiting(primitive_kind kind, int change) noexcept;

 private:
  std::string backend_;
  std::atomic<bool> observed_{false};
  mutable std::mutex mutex_;
  std::shared_ptr<observer> observer_;
  std::array<std::atomic<std::size_t>, 4> waiting_{};
};

// What a grant reports after the acquire that made it, to the observer that saw that acquire (so
// that an observer counting held leases sees each grant end, even if the backend's observer is
// replaced meanwhile).
class observed_grant {
 public:
  observed_grant(std::shared_ptr<observer> target, std::shared_ptr<const observation_point> point, primitive_kind kind,
                 clock::time_point granted_at) noexcept;

  void released(std::string_view name, const std::error_code& ec) const noexcept;
  void renewed(std::string_view name, clock::duration margin, const std::error_code& ec) const noexcept;
  void lost(std::string_view name, const std::error_code& reason) const noexcept;

 private:
  observed_lock lock(std::string_view name) const noexcept;

  std::shared_ptr<observer> target_;
  std::shared_ptr<const observation_point> point_;
  primitive_kind kind_;
  clock::time_point granted_at_;
};

// Around one public acquire call: counts it among the waiters while it waits (a deadline in the
// future), gives its grant an observed_grant, and reports its outcome. Does nothing when the
// backend has no observer.
class observed_acquire {
 public:
  observed_acquire(const std::shared_ptr<observation_point>& point, primitive_kind kind, std::string_view name,
                   clock::time_point deadline, std::uint32_t permits = 1) noexcept;
  ~observed_acquire();
  observed_acquire(const observed_acquire&) = delete;
  observed_acquire& operator=(const observed_acquire&) = delete;

  // Before the grant is handed out (and its watchdog started): what it will report later.
  void attach(spi::lease_state* grant) noexcept;
  // The call's outcome; `granted` is whether it returns a lease.
  void finish(bool granted, const std::error_code& ec) noexcept;

 private:
  void stop_waiting() noexcept;

  std::shared_ptr<observer> target_;
  std::shared_ptr<observation_point> point_;
  primitive_kind kind_;
  std::string_view name_;
  std::uint32_t permits_;
  clock::time_point start_;
  bool waiting_ = false;
};

}  // namespace dlock::detail
