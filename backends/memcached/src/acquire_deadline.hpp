#pragma once
// The caller's deadline inside a memcached:// acquire (dlock/acquire_deadline.hpp): each command
// of an attempt runs with libmemcached's connect and poll timeouts cut to what is left until
// io_deadline() (io_bound), and borrowing a handle waits no longer either.
#include <libmemcached/memcached.h>

#include <chrono>

#include "dlock/acquire_deadline.hpp"

namespace dlock::memcached {

using steady_clock = std::chrono::steady_clock;
using spi::deadline_grace;
using spi::deadline_scope;
using spi::io_deadline;
using spi::wait_out_outages;

// A handle's timeouts for the commands of one attempt: each refresh() (and the constructor) cuts
// the connect and poll timeouts to what is left until io_deadline() (at least 1 ms), never above
// the configured ones, which the destructor puts back. Outside a scope it changes nothing.
class io_bound {
 public:
  io_bound(memcached_st* m, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout) noexcept;
  ~io_bound();
  io_bound(const io_bound&) = delete;
  io_bound& operator=(const io_bound&) = delete;
  void refresh() noexcept;

 private:
  memcached_st* m_;
  std::chrono::milliseconds connect_timeout_, io_timeout_;
  bool bounded_;
};

}  // namespace dlock::memcached
