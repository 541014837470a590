#pragma once
// The caller's deadline inside an acquire of a SQL backend (dlock/acquire_deadline.hpp): the pool
// (connecting, waiting for a connection) and every statement below the backend's deadline scope
// read it. Connecting inside the scope takes at most until io_deadline() (the connect timeout is
// cut to what is left of it); a statement that has not answered by then has its socket shut down
// (socket_guard), so it fails at once as a lost connection, and the connection is dropped.
#include <chrono>
#include <cstdint>

#include "dlock/acquire_deadline.hpp"

namespace dlock::sql {

using steady_clock = std::chrono::steady_clock;
using spi::current_deadline;
using spi::deadline_grace;
using spi::deadline_scope;
using spi::io_deadline;
using spi::wait_out_outages;

// While alive, and inside a deadline scope: `fd` is shut down (shutdown(2), never closed) if the
// guard still lives at io_deadline(), so a statement stuck on it returns. Outside a scope, or for
// fd < 0, it does nothing. Destroying it before the deadline disarms it for good.
class socket_guard {
 public:
  explicit socket_guard(int fd) noexcept;
  ~socket_guard();
  socket_guard(const socket_guard&) = delete;
  socket_guard& operator=(const socket_guard&) = delete;
  // Whether it shut the socket down (the statement's failure is the deadline's).
  bool fired() const noexcept;

 private:
  std::uint64_t id_ = 0;
};

}  // namespace dlock::sql
