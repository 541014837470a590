#pragma once
// One named file:// lock. One attempt = open + flock(LOCK_EX|LOCK_NB); waiting is the core's
// jittered polling (the kernel could block in flock, but not with a deadline or a cancellation).
#include <memory>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"

namespace dlock::file {

class file_lock final : public distributed_lock {
 public:
  file_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir);

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<const lock_directory> dir_;
  std::string file_name_;
};

}  // namespace dlock::file
