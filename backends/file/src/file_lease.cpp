#include "file_lease.hpp"

namespace dlock::file {

file_lease::file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
                       std::string file_name, held_file held)
    : lease_state(std::move(name), ttl, clock::time_point::max()),
      dir_(std::move(dir)),
      file_name_(std::move(file_name)),
      held_(std::move(held)) {}

void file_lease::do_release(std::error_code& ec) noexcept {
  try {
    if (!still_names(dir_->fd(), file_name_, held_.device, held_.inode)) {
      set_error(ec, errc::not_owner,
                "file lock '" + name() + "': lock file " + dir_->where(file_name_) +
                    " was deleted or replaced while held, so another process may have locked the new file");
    }
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
  held_.fd.reset();  // closing the last fd of the open file description drops the flock
}

}  // namespace dlock::file
