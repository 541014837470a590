#include "file_lock.hpp"

#include "file_lease.hpp"
#include "lock_file_watch.hpp"

namespace dlock::file {

// The core's release_watch over a lock_file_watch: attempts through the watch's own fd.
class file_release_watch final : public spi::release_watch {
 public:
  explicit file_release_watch(file_lock& lock) : lock_(lock), watch_(*lock.dir_, lock.file_name_) {}

  std::unique_ptr<spi::lease_state> try_acquire(std::error_code& ec) noexcept override {
    try {
      auto held = watch_.try_lock(ec);
      if (!held) return nullptr;
      return lock_.make_lease(std::move(*held));
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_error, "file lock '" + std::string(lock_.name()) + "': " + e.what());
      return nullptr;
    }
  }

  void wait_until(clock::time_point until) noexcept override { watch_.wait_until(until); }

 private:
  file_lock& lock_;
  lock_file_watch watch_;
};

file_lock::file_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<const lock_directory> dir)
    : distributed_lock(name, caps, std::move(options)), dir_(std::move(dir)), file_name_(lock_file_name(name)) {}

std::unique_ptr<spi::lease_state> file_lock::make_lease(held_file held) {
  return std::make_unique<file_lease>(std::string(name()), options().ttl, dir_, file_name_, std::move(held));
}

std::unique_ptr<spi::lease_state> file_lock::do_try_acquire(std::error_code& ec) noexcept {
  try {
    auto held = try_lock_file(dir_->fd(), file_name_, dir_->where(file_name_), ec);
    if (!held) return nullptr;
    return make_lease(std::move(*held));
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "file lock '" + std::string(name()) + "': " + e.what());
    return nullptr;
  }
}

std::unique_ptr<spi::release_watch> file_lock::do_watch_release() noexcept {
  try {
    return std::make_unique<file_release_watch>(*this);
  } catch (...) {
    return nullptr;  // no inotify instance or watch left: the core polls with backoff
  }
}

}  // namespace dlock::file
