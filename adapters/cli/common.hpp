#pragma once
// What run and hold share: opening the lock, waiting for it, and a self-pipe that turns signals
// and the lease's lost signal into readable events for a poll() loop.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "dlock/dlock.hpp"

namespace dlock::cli {

std::unique_ptr<distributed_lock> open_lock(const std::string& uri, const std::string& name,
                                            std::optional<std::chrono::milliseconds> ttl);

// nullopt wait: as long as it takes; 0: one try. Throws dlock::error(errc::timeout) when it
// could not get the lock in time (main maps that to exit 75).
lease acquire_within(distributed_lock& lock, std::optional<std::chrono::milliseconds> wait);

std::string token_text(const lease& l);  // the fencing token, or "-"

// The process's self-pipe: signal handlers and other threads write one byte per event.
class event_pipe {
 public:
  static event_pipe& instance();
  int read_fd() const noexcept { return fds_[0]; }
  void post(char event) const noexcept;  // async-signal-safe
  // Installs handlers that post the signal number as a byte for SIGINT, SIGTERM, SIGHUP, SIGCHLD.
  void catch_signals();

 private:
  event_pipe();
  int fds_[2];
};

}  // namespace dlock::cli
