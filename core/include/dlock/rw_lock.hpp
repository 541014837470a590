#pragma once
// rw_lock: one named reader-writer lock on one backend. Many readers hold it at once, or one
// writer alone. The same shape as distributed_lock: non-virtual public forms over a small SPI (one
// attempt per mode, and the wait where the server queues waiters), each form returning a lease
// that carries lost_token, renew, release-reports-not_owner and, where the backend can, a fencing
// token.
//
//   auto rw = backend->make_rw_lock("catalog");
//   if (auto reading = rw->try_acquire_read_for(std::chrono::seconds(5))) { ...read... }
//   auto writing = rw->acquire_write();   // waits until no reader or writer holds it
//
// Identity: a rw_lock object is one owner (lock_options::owner), as a lock object is. Whether a
// waiting writer holds back new readers (so a stream of readers cannot starve it) is the
// capability writer_preferred of backend::rw_caps().
#include <chrono>
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

// The two sides of a reader-writer lock.
enum class access { read, write };
std::string_view to_string(access a) noexcept;

class rw_lock {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~rw_lock();
  rw_lock(const rw_lock&) = delete;
  rw_lock& operator=(const rw_lock&) = delete;

  std::string_view name() const noexcept { return name_; }
  // The capabilities of this lock's leases (backend::rw_caps()).
  capabilities caps() const noexcept { return caps_; }
  const lock_options& options() const noexcept { return options_; }
  const std::string& owner() const noexcept { return options_.owner; }

  // As distributed_lock's forms: an empty lease means held by others in a conflicting mode (no
  // error), a server outage inside a wait is waited out until the deadline, and no form returns a
  // grant without validity left.
  [[nodiscard]] lease try_acquire_read() { return try_acquire(access::read); }
  [[nodiscard]] lease try_acquire_read(std::error_code& ec) noexcept { return try_acquire(access::read, ec); }
  [[nodiscard]] lease try_acquire_read_until(clock::time_point deadline) {
    return try_acquire_until(access::read, deadline);
  }
  [[nodiscard]] lease try_acquire_read_until(clock::time_point deadline, std::error_code& ec) noexcept {
    return try_acquire_until(access::read, deadline, ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_read_for(std::chrono::duration<Rep, Period> timeout) {
    return try_acquire_until(access::read, distributed_lock::deadline_after(timeout));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_read_for(std::chrono::duration<Rep, Period> timeout, std::error_code& ec) noexcept {
    return try_acquire_until(access::read, distributed_lock::deadline_after(timeout), ec);
  }
  [[nodiscard]] lease acquire_read() { return acquire(access::read); }
  [[nodiscard]] lease acquire_read(std::error_code& ec) noexcept { return acquire(access::read, ec); }

  [[nodiscard]] lease try_acquire_write() { return try_acquire(access::write); }
  [[nodiscard]] lease try_acquire_write(std::error_code& ec) noexcept { return try_acquire(access::write, ec); }
  [[nodiscard]] lease try_acquire_write_until(clock::time_point deadline) {
    return try_acquire_until(access::write, deadline);
  }
  [[nodiscard]] lease try_acquire_write_until(clock::time_point deadline, std::error_code& ec) noexcept {
    return try_acquire_until(access::write, deadline, ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_write_for(std::chrono::duration<Rep, Period> timeout) {
    return try_acquire_until(access::write, distributed_lock::deadline_after(timeout));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_write_for(std::chrono::duration<Rep, Period> timeout, std::error_code& ec) noexcept {
    return try_acquire_until(access::write, distributed_lock::deadline_after(timeout), ec);
  }
  [[nodiscard]] lease acquire_write() { return acquire(access::write); }
  [[nodiscard]] lease acquire_write(std::error_code& ec) noexcept { return acquire(access::write, ec); }

  // The waiting forms with a stop token, as distributed_lock's: a stop request ends the wait with
  // std::errc::operation_canceled and an empty lease, and leaves nothing behind.
  [[nodiscard]] lease try_acquire_read_until(clock::time_point deadline, std::stop_token stop) {
    return try_acquire_until(access::read, deadline, std::move(stop));
  }
  [[nodiscard]] lease try_acquire_read_until(clock::time_point deadline, std::stop_token stop,
                                             std::error_code& ec) noexcept {
    return try_acquire_until(access::read, deadline, std::move(stop), ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_read_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop) {
    return try_acquire_until(access::read, distributed_lock::deadline_after(timeout), std::move(stop));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_read_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                           std::error_code& ec) noexcept {
    return try_acquire_until(access::read, distributed_lock::deadline_after(timeout), std::move(stop), ec);
  }
  [[nodiscard]] lease acquire_read(std::stop_token stop) { return acquire(access::read, std::move(stop)); }
  [[nodiscard]] lease acquire_read(std::stop_token stop, std::error_code& ec) noexcept {
    return acquire(access::read, std::move(stop), ec);
  }
  [[nodiscard]] lease try_acquire_write_until(clock::time_point deadline, std::stop_token stop) {
    return try_acquire_until(access::write, deadline, std::move(stop));
  }
  [[nodiscard]] lease try_acquire_write_until(clock::time_point deadline, std::stop_token stop,
                                              std::error_code& ec) noexcept {
    return try_acquire_until(access::write, deadline, std::move(stop), ec);
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_write_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop) {
    return try_acquire_until(access::write, distributed_lock::deadline_after(timeout), std::move(stop));
  }
  template <class Rep, class Period>
  [[nodiscard]] lease try_acquire_write_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                            std::error_code& ec) noexcept {
    return try_acquire_until(access::write, distributed_lock::deadline_after(timeout), std::move(stop), ec);
  }
  [[nodiscard]] lease acquire_write(std::stop_token stop) { return acquire(access::write, std::move(stop)); }
  [[nodiscard]] lease acquire_write(std::stop_token stop, std::error_code& ec) noexcept {
    return acquire(access::write, std::move(stop), ec);
  }

  // The same, with the side as an argument (the CLI and generic code choose it at run time).
  [[nodiscard]] lease try_acquire(access side);
  [[nodiscard]] lease try_acquire(access side, std::error_code& ec) noexcept;
  [[nodiscard]] lease try_acquire_until(access side, clock::time_point deadline);
  [[nodiscard]] lease try_acquire_until(access side, clock::time_point deadline, std::error_code& ec) noexcept;
  [[nodiscard]] lease acquire(access side);
  [[nodiscard]] lease acquire(access side, std::error_code& ec) noexcept;
  [[nodiscard]] lease try_acquire_until(access side, clock::time_point deadline, std::stop_token stop);
  [[nodiscard]] lease try_acquire_until(access side, clock::time_point deadline, std::stop_token stop,
                                        std::error_code& ec) noexcept;
  [[nodiscard]] lease acquire(access side, std::stop_token stop);
  [[nodiscard]] lease acquire(access side, std::stop_token stop, std::error_code& ec) noexcept;

 protected:
  // `options.owner` must be set (backend::make_rw_lock fills it in).
  rw_lock(std::string name, capabilities caps, lock_options options);

  // SPI. One attempt at `side`: nullptr with !ec means "held in a conflicting mode". Never throws.
  virtual std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept = 0;
  // Override where the server queues or wakes waiters (capability::blocking). Return nullptr with
  // !ec when the deadline passed (deadline may be time_point::max()), or a stop request came
  // (spi::stop_requested(), dlock/acquire_stop.hpp). Default: do_try_acquire polled with
  // jittered exponential backoff (options().poll), one last attempt at the deadline.
  virtual std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                             std::error_code& ec) noexcept;

 private:
  friend class backend;  // gives it its observer (backend::make_*)

  std::string name_;
  capabilities caps_;
  lock_options options_;
  // The observer of the backend object that made it (dlock/observer.hpp); nullptr otherwise.
  std::shared_ptr<detail::observation_point> observation_;
};

}  // namespace dlock
