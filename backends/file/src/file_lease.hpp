#pragma once
// One grant of file://: the flock'ed files it holds (the lock file of a mutex, reader or writer;
// a semaphore's permit slots and its presence file) and its fencing token.
#include <memory>
#include <vector>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"

namespace dlock::file {

// One flock'ed file of a grant, and its name (checked again at release).
struct named_hold {
  std::string file_name;
  held_file held;
};

class file_lease final : public spi::lease_state {
 public:
  file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
             std::vector<named_hold> holds, std::uint64_t token);
  // A grant of one file (the lock file), whose token is held.token.
  file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
             std::string file_name, held_file held);

  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 protected:
  // not_owner when any of the files was deleted or replaced while held (someone may hold the new
  // one), then closes every fd, which drops the flocks.
  void do_release(std::error_code& ec) noexcept override;
  // No do_renew: a flock has no ttl while its holder lives (not renewable).

 private:
  std::shared_ptr<const lock_directory> dir_;
  std::vector<named_hold> holds_;
  std::uint64_t token_;
};

}  // namespace dlock::file
