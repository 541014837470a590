#include "file_backend.hpp"

#include "file_lock.hpp"
#include "lock_file.hpp"

namespace dlock::file {

file_backend::file_backend(const uri& u, const lock_options& defaults)
    : backend(file_caps, lock_scope::host, name_limits{max_name_length}, defaults, u.redacted()),
      dir_(std::make_shared<const lock_directory>(directory_of(u))) {}

std::unique_ptr<distributed_lock> file_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<file_lock>(std::move(name), caps(), std::move(options), dir_);
}

}  // namespace dlock::file
