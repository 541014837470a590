#pragma once
// One held lock file: the open fd carrying the flock, and the inode it was taken on.
#include <memory>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"

namespace dlock::file {

class file_lease final : public spi::lease_state {
 public:
  file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
             std::string file_name, held_file held);

  std::optional<std::uint64_t> fencing_token() const noexcept override { return held_.token; }

 protected:
  // Checks the lock file is still the inode we locked (not_owner if it was deleted or replaced:
  // someone else may hold the new file), then closes the fd, which drops the flock.
  void do_release(std::error_code& ec) noexcept override;
  // No do_renew: a file lock has no ttl while its holder lives (not renewable).

 private:
  std::shared_ptr<const lock_directory> dir_;
  std::string file_name_;
  held_file held_;
};

}  // namespace dlock::file
