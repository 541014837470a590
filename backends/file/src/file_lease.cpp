#include "file_lease.hpp"

namespace dlock::file {

file_lease::file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
                       std::vector<named_hold> holds, std::uint64_t token)
    : lease_state(std::move(name), ttl, clock::time_point::max()),
      dir_(std::move(dir)),
      holds_(std::move(holds)),
      token_(token) {}

namespace {
std::vector<named_hold> one_hold(std::string file_name, held_file held) {
  std::vector<named_hold> holds;
  holds.push_back({std::move(file_name), std::move(held)});
  return holds;
}
}  // namespace

file_lease::file_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<const lock_directory> dir,
                       std::string file_name, held_file held)
    : file_lease(std::move(name), ttl, std::move(dir), one_hold(std::move(file_name), std::move(held)), 0) {
  token_ = holds_.front().held.token;
}

void file_lease::do_release(std::error_code& ec) noexcept {
  try {
    for (const auto& h : holds_) {
      if (still_names(dir_->fd(), h.file_name, h.held.device, h.held.inode)) continue;
      set_error(ec, errc::not_owner,
                "file:// lock '" + name() + "': " + dir_->where(h.file_name) +
                    " was deleted or replaced while held, so another process may hold the new file");
      break;
    }
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
  holds_.clear();  // closing the last fd of each open file description drops its flock
}

}  // namespace dlock::file
