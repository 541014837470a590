#pragma once
// semaphore: one named counting semaphore of max_count() permits on one backend. At most
// max_count() permits are held at once, over every process; one lease holds the permits one
// acquire took, and gives them all back when released (or lost: a dead holder's permits come
// back after its ttl or with its session, as a dead holder's lock does).
//
//   auto api_calls = backend->make_semaphore("rate-limited-api", 3);
//   if (auto permit = api_calls->try_acquire_for(std::chrono::seconds(5))) { ...call the API... }
//
// Every process using a name must give it the same max_count: the backends that store it check
// it and refuse a different one (errc::name_conflict, the message naming the max_count in use);
// the others cannot tell.
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/capabilities.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock_options.hpp"

namespace dlock {

namespace spi {
class lease_state;
}

// The largest max_count a semaphore accepts (the servers' layouts keep a permit each: a node, a
// row, a slot, a zset member).
inline constexpr std::uint32_t max_semaphore_count = 100'000;

class semaphore {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~semaphore();
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  std::string_view name() const noexcept { return name_; }
  std::uint32_t max_count() const noexcept { return max_count_; }
  // The capabilities of this semaphore's leases (backend::semaphore_caps()).
  capabilities caps() const noexcept { return caps_; }
  const lock_options& options() const noexcept { return options_; }
  const std::string& owner() const noexcept { return options_.owner; }

  // Takes `permits` (1 to max_count(), else errc::invalid_argument) together, or none. An empty
  // lease: fewer than `permits` were free (no error). The waiting forms wait out server outages
  // until the deadline, as a lock's do.
  [[nodiscard]] lease try_acquire(std::uint32_t permits = 1);
  [[nodiscard]] lease try_acquire(std::error_code& ec) noexcept { return try_acquire(1, ec); }
  [[nodiscard]] lease try_acquire(std::uint32_t permits, std::error_code& ec) noexcept;

  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::uint32_t permits = 1);
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
    return try_acquire_until(deadline, 1, ec);
  }
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::uint32_t permits,
                                        std::error_code& ec) noexcept;

  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::uint32_t permits = 1) {
    return try_acquire_until(distributed_lock::deadline_after(timeout), permits);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), 1, ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::uint32_t permits,
                                      std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), permits, ec);
  }

  // Waits as long as it takes, server outages included. Never returns an empty lease.
  [[nodiscard]] lease acquire(std::uint32_t permits = 1);
  [[nodiscard]] lease acquire(std::error_code& ec) noexcept { return acquire(1, ec); }
  [[nodiscard]] lease acquire(std::uint32_t permits, std::error_code& ec) noexcept;

  // The waiting forms with a stop token, as distributed_lock's: a stop request ends the wait with
  // std::errc::operation_canceled and an empty lease, and leaves nothing behind.
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::stop_token stop, std::uint32_t permits = 1);
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::stop_token stop,
                                        std::error_code& ec) noexcept {
    return try_acquire_until(deadline, std::move(stop), 1, ec);
  }
  [[nodiscard]] lease try_acquire_until(clock::time_point deadline, std::stop_token stop, std::uint32_t permits,
                                        std::error_code& ec) noexcept;
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                      std::uint32_t permits = 1) {
    return try_acquire_until(distributed_lock::deadline_after(timeout), std::move(stop), permits);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                      std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), std::move(stop), 1, ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                      std::uint32_t permits, std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), std::move(stop), permits, ec);
  }
  [[nodiscard]] lease acquire(std::stop_token stop, std::uint32_t permits = 1);
  [[nodiscard]] lease acquire(std::stop_token stop, std::error_code& ec) noexcept {
    return acquire(std::move(stop), 1, ec);
  }
  [[nodiscard]] lease acquire(std::stop_token stop, std::uint32_t permits, std::error_code& ec) noexcept;

 protected:
  // `options.owner` must be set and 1 <= max_count <= max_semaphore_count (backend::make_semaphore
  // checks both).
  semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options);

  // SPI. One attempt at `permits` (already checked against max_count): nullptr with !ec means
  // "not enough free". Never throws.
  virtual std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept = 0;
  // Override where the server queues or wakes waiters (capability::blocking); a stop request
  // (spi::stop_requested(), dlock/acquire_stop.hpp) ends the wait as the deadline does. Default:
  // polling with jittered exponential backoff, one last attempt at the deadline.
  virtual std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                             std::error_code& ec) noexcept;

 private:
  friend class backend;  // gives it its observer (backend::make_*)

  bool check_permits(std::uint32_t permits, std::error_code& ec) const noexcept;

  std::string name_;
  std::uint32_t max_count_;
  capabilities caps_;
  lock_options options_;
  // The observer of the backend object that made it (dlock/observer.hpp); nullptr otherwise.
  std::shared_ptr<detail::observation_point> observation_;
};

}  // namespace dlock
