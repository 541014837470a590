#pragma once
// A plain TCP connection to one memcached server speaking the ASCII protocol, for the one thing
// libmemcached cannot do: write many requests in one go. libmemcached sends each `cas` with a
// write (and a poll) of its own, and buffers only `set`; the watchdog's batch of hundreds of
// renewals then costs a system call pair per lease. Here the whole batch is one buffer.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "client_pool.hpp"

namespace dlock::memcached {

class ascii_pipeline {
 public:
  ascii_pipeline(std::string host, in_port_t port, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds io_timeout);
  ~ascii_pipeline();
  ascii_pipeline(const ascii_pipeline&) = delete;
  ascii_pipeline& operator=(const ascii_pipeline&) = delete;

  // Sends `request` (commands that answer nothing: `noreply` stores, then `gets_lines` `gets`
  // commands) and reads the answers of the `gets` commands: every item found, by key. nullopt
  // when the server could not be reached or answered something else (an error line, e.g.
  // SERVER_ERROR for a noreply store); `why` says what, and the connection is closed so that the
  // next call starts on a clean one.
  std::optional<std::unordered_map<std::string, item>> exchange(std::string_view request, int gets_lines,
                                                                std::string& why);

 private:
  bool connect(std::string& why);
  void close() noexcept;

  std::string host_;
  in_port_t port_;
  std::chrono::milliseconds connect_timeout_, io_timeout_;
  int fd_ = -1;
};

}  // namespace dlock::memcached
