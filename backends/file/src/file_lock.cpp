#include "file_lock.hpp"

#include "file_lease.hpp"

namespace dlock::file {

// The core's release_watch over an exclusive_wait: the turnstile kept, attempts through the
// watch's own fd.
class file_release_watch final : public spi::release_watch {
 public:
  explicit file_release_watch(file_lock& lock) : lock_(lock), wait_(lock.lock_, lock.options().poll) {}

  std::unique_ptr<spi::lease_state> try_acquire(std::error_code& ec) noexcept override {
    try {
      auto held = wait_.try_lock(ec);
      if (!held || !lock_.lock_.grant(*held, lock_side::mutex, ec)) return nullptr;
      return lock_.make_lease(std::move(*held));
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_error, "file lock '" + std::string(lock_.name()) + "': " + e.what());
      return nullptr;
    }
  }

  void wait_until(clock::time_point until) noexcept override { wait_.wait_until(until); }

 private:
  file_lock& lock_;
  exclusive_wait wait_;
};

file_lock::file_lock(std::string name, capabilities caps, lock_options options,
                     std::shared_ptr<const lock_directory> dir)
    : distributed_lock(name, caps, std::move(options)), lock_(std::move(dir), std::move(name)) {}

std::unique_ptr<spi::lease_state> file_lock::make_lease(held_file held) {
  return std::make_unique<file_lease>(lock_.name(), options().ttl, lock_.dir(), lock_.files().lock, std::move(held));
}

std::unique_ptr<spi::lease_state> file_lock::do_try_acquire(std::error_code& ec) noexcept {
  try {
    auto held = lock_.try_once(lock_side::mutex, ec);
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
    return nullptr;  // out of memory: the core polls with backoff
  }
}

}  // namespace dlock::file
