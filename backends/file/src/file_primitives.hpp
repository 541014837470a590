#pragma once
// file://'s reader-writer lock and counting semaphore. The reader-writer lock is its name's lock
// (name_lock.hpp), shared with the mutex of the name: readers LOCK_SH, a writer LOCK_EX on
// <key>.lock. The semaphore is its own files (shared_files.hpp), and never holds beside that lock.
// One attempt = non-blocking flocks; the kernel drops them all when the holder dies. Waiting:
// readers and the semaphore poll with the core's jittered backoff; a writer takes the turnstile
// and keeps it (readers arriving after it stay out) and sleeps in the kernel until the lock file
// is closed (exclusive_wait). The kernel queues nobody.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "name_lock.hpp"
#include "shared_files.hpp"

namespace dlock::file {

class file_rw_lock final : public rw_lock {
 public:
  file_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override;
  // A writer waits as the mutex's waiting head does (exclusive_wait); a reader polls (the default).
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  std::unique_ptr<spi::lease_state> make_lease(held_file held);

  name_lock lock_;
};

class file_semaphore final : public semaphore {
 public:
  file_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps, lock_options options,
                 std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;

 private:
  // Refuses the attempt (errc::name_conflict): the name's lock file is held.
  void refuse_beside_the_lock(std::error_code& ec) const;

  std::shared_ptr<const lock_directory> dir_;
  semaphore_file_names files_;
  std::string lock_file_;  // the name's lock file (name_lock.hpp), looked at
  kept_file meta_;         // the counter file, held around each attempt
  kept_file lock_;         // the lock file, looked at (not created)
};

}  // namespace dlock::file
