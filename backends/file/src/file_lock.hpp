#pragma once
// One named file:// lock. One attempt = open + flock(LOCK_EX|LOCK_NB). Waiting is the core's fair
// line of this process, whose head sleeps in the kernel until the lock file is released
// (lock_file_watch.hpp: inotify), so a release in another process wakes it at once too.
#include <memory>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"

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

  std::shared_ptr<const lock_directory> dir_;
  std::string file_name_;
};

}  // namespace dlock::file
