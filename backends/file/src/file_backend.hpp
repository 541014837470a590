#pragma once
// file:///dir: locks shared by the processes of one host, one flock'ed lock file per name.
#include <memory>

#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "lock_directory.hpp"

namespace dlock::file {

class file_backend final : public backend {
 public:
  file_backend(const uri& u, const lock_options& defaults);
  const lock_directory& directory() const noexcept { return *dir_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  // From /proc/locks (file_inspection.hpp). No force_release: another process's flock cannot be
  // taken from it, and replacing the lock file would restart the name's fencing counter.
  lock_info do_inspect(const std::string& name) override;
  std::vector<std::string> do_list(const std::string& prefix) override;

 private:
  std::shared_ptr<const lock_directory> dir_;
};

}  // namespace dlock::file
