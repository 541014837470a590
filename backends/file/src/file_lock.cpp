#include "file_lock.hpp"

#include "file_lease.hpp"
#include "lock_file.hpp"

namespace dlock::file {

file_lock::file_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir)
    : distributed_lock(name, caps, std::move(options)), dir_(std::move(dir)), file_name_(lock_file_name(name)) {}

std::unique_ptr<spi::lease_state> file_lock::do_try_acquire(std::error_code& ec) noexcept {
  try {
    auto held = try_lock_file(dir_->fd(), file_name_, dir_->where(file_name_), ec);
    if (!held) return nullptr;
    return std::make_unique<file_lease>(std::string(name()), options().ttl, dir_, file_name_, std::move(*held));
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "file lock '" + std::string(name()) + "': " + e.what());
    return nullptr;
  }
}

}  // namespace dlock::file
