#pragma once
// One named file:// mutex: the exclusive side of its name's lock (name_lock.hpp), so it excludes
// the name's readers and writers and they exclude it. One attempt = the turnstile, then
// flock(LOCK_EX|LOCK_NB) on the lock file, then the grant. Waiting is the core's fair line of this
// process, whose head holds the turnstile (readers arriving after it stay out, as behind a
// waiting writer) and sleeps in the kernel until the lock file is released (lock_file_watch.hpp:
// inotify), so a release in another process, or of a reader or writer, wakes it at once too.
#include <memory>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "name_lock.hpp"

namespace dlock::file {

class file_lock final : public distributed_lock {
 public:
  file_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override;
  std::unique_ptr<spi::release_watch> do_watch_release() noexcept override;

 private:
  friend class file_release_watch;
  std::unique_ptr<spi::lease_state> make_lease(held_file held);

  name_lock lock_;
};

}  // namespace dlock::file
