#pragma once
// spi::release_watch: how a backend that cannot queue waiters on its server, but can be told that
// a lock was freed, lets the head of this process's waiters sleep until then instead of polling
// (file://: inotify on the lock file, whose last close is the release). For backend authors (see
// spi.hpp and distributed_lock::do_watch_release).
#include <chrono>
#include <memory>
#include <system_error>

namespace dlock::spi {

class lease_state;

class release_watch {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~release_watch() = default;

  // One attempt, as do_try_acquire, made while watching: it must not itself wake the watch (an
  // attempt that opens and closes the lock file would, so the watch keeps its own).
  virtual std::unique_ptr<lease_state> try_acquire(std::error_code& ec) noexcept = 0;

  // Returns once the lock may have been released (by any process, this one included) since the
  // watch was made or since the last return, or at `until` at the latest. Returning early without
  // a release is allowed (the caller tries again); missing a release is not. On a failure of its
  // own it sleeps until `until` (the core then asks the server, as a polling wait would). A stop
  // request of the thread's acquire (spi::stop_requested(), dlock/acquire_stop.hpp) ends it too.
  virtual void wait_until(clock::time_point until) noexcept = 0;
};

}  // namespace dlock::spi
