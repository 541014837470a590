#pragma once
// The one bounded pool of sql::connection of the SQL backends (PostgreSQL and MySQL, every
// scheme), handing out RAII handles. Locks that hold a connection for the whole lease (FOR
// UPDATE, advisory locks, GET_LOCK) take a *dedicated* handle: it is counted against
// max_dedicated as well as against max_connections, so a burst of leases cannot take every
// connection the short statements need.
//
// When full, a checkout waits: for a connection to come back (max_connections are out) or, for a
// dedicated one, for a lease to end (max_dedicated are held). It gives up after checkout_timeout
// with backend_unavailable naming the bound it hit. One behaviour for both bounds and every scheme.
// Inside an acquire, its deadline (deadline.hpp) and its stop request (acquire_stop.hpp) end the
// wait as well.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include "dlock_sql/connection.hpp"

namespace dlock::sql {

struct pool_options {
  std::size_t max_idle = 8;                                            // URI pool_size: idle connections kept
  std::size_t max_connections = 64;                                    // URI max_connections: idle + in use + dedicated
  std::size_t max_dedicated = 32;                                      // URI max_dedicated: connections held by leases
  std::chrono::milliseconds connect_timeout{std::chrono::seconds{5}};  // URI connect_timeout
  // How long a checkout waits when the pool is full (either bound) before backend_unavailable.
  std::chrono::milliseconds checkout_timeout{std::chrono::seconds{10}};
};

// Opens one new connection within `connect_timeout` (the URI's, or less: what is left of the
// caller's deadline, deadline.hpp), or returns nullptr with ec (and dlock's last error message)
// set: authentication_failed / backend_unavailable / backend_error. Never throws.
using connector =
    std::function<std::unique_ptr<connection>(std::chrono::milliseconds connect_timeout, std::error_code& ec)>;

class pool : public std::enable_shared_from_this<pool> {
 public:
  class handle;

  static std::shared_ptr<pool> make(connector connect, pool_options options);
  ~pool();

  // A connection for a few statements; returned to the pool when the handle dies.
  [[nodiscard]] handle checkout(std::error_code& ec) noexcept;
  // A connection held for a lease (FOR UPDATE transaction, advisory lock session).
  [[nodiscard]] handle checkout_dedicated(std::error_code& ec) noexcept;
  // The same, waiting for a full pool until `deadline` (the caller's acquire deadline;
  // time_point::max(): as long as it takes) instead of checkout_timeout.
  [[nodiscard]] handle checkout_dedicated(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;

  const pool_options& options() const noexcept { return options_; }

 private:
  pool(connector connect, pool_options options);
  handle checkout_impl(bool dedicated, std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
  void give_back(std::unique_ptr<connection> c, bool dedicated) noexcept;

  connector connect_;
  pool_options options_;
  mutable std::mutex mutex_;
  std::condition_variable_any returned_;  // any: a stop request of the caller's acquire wakes it
  std::uint64_t returns_ = 0;             // connections given back or slots freed, ever
  std::vector<std::unique_ptr<connection>> idle_;
  std::size_t open_ = 0;                 // connections alive (idle + out)
  std::size_t dedicated_ = 0;            // of which held by leases
  std::atomic<std::size_t> waiting_{0};  // checkouts waiting for a connection to come back

  friend class handle;
};

class pool::handle {
 public:
  handle() = default;
  handle(handle&&) noexcept = default;
  handle& operator=(handle&&) noexcept;
  ~handle();

  explicit operator bool() const noexcept { return conn_ != nullptr; }
  connection* operator->() const noexcept { return conn_.get(); }
  connection& operator*() const noexcept { return *conn_; }
  // Closes the connection instead of returning it (after an error left it in an unknown state).
  void discard() noexcept;
  // Whether a checkout of its pool is waiting for a connection to come back (a session kept
  // for sharing gives its connection back then).
  bool pool_has_waiters() const noexcept;

 private:
  friend class pool;
  handle(std::shared_ptr<pool> owner, std::unique_ptr<connection> conn, bool dedicated) noexcept
      : owner_(std::move(owner)), conn_(std::move(conn)), dedicated_(dedicated) {}
  void give_back() noexcept;

  std::shared_ptr<pool> owner_;
  std::unique_ptr<connection> conn_;
  bool dedicated_ = false;
};

}  // namespace dlock::sql
