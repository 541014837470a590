#pragma once
// file://'s reader-writer lock and counting semaphore (files and counters: shared_files.hpp).
// One attempt = non-blocking flocks on fds opened for it; the kernel drops them all when the
// holder dies. Waiting: readers and the semaphore poll with the core's jittered backoff; a
// writer polls for the turnstile, then keeps it (readers arriving after it stay out) and sleeps
// in the kernel until the lock file is closed (lock_file_watch.hpp). The kernel queues nobody.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "shared_files.hpp"

namespace dlock::file {

// One flock'ed file of a grant, and its name (checked again at release).
struct named_hold {
  std::string file_name;
  held_file held;
};

// One grant: a reader's or writer's lock file, or a semaphore's permit slots.
class shared_file_lease final : public spi::lease_state {
 public:
  shared_file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
                    std::vector<named_hold> holds, std::uint64_t token);

  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 protected:
  // not_owner when any of the files was deleted or replaced while held (someone may hold the new
  // one), then closes every fd, which drops the flocks. Not renewable: no do_renew.
  void do_release(std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<const lock_directory> dir_;
  std::vector<named_hold> holds_;
  std::uint64_t token_;
};

class file_rw_lock final : public rw_lock {
 public:
  file_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override;
  // A writer takes the turnstile first (polling for it), then waits for the lock while keeping it
  // (inotify); a reader polls (the default).
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  // One attempt: the turnstile, the lock, the token.
  std::unique_ptr<spi::lease_state> try_once(access side, std::error_code& ec);
  // The lease of a held lock file, with the next token.
  std::unique_ptr<spi::lease_state> grant(held_file held, std::error_code& ec);
  std::optional<held_file> take(const std::string& file_name, int operation, std::error_code& ec) const;

  std::shared_ptr<const lock_directory> dir_;
  rw_file_names files_;
};

class file_semaphore final : public semaphore {
 public:
  file_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                 std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<const lock_directory> dir_;
  semaphore_file_names files_;
};

}  // namespace dlock::file
