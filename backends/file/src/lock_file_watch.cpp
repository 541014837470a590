#include "lock_file_watch.hpp"

#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::file {
namespace {

// Closes of the holder's fd (the release, or its death), and anything that may have put another
// inode under the name (unlink, rename over it): the next attempt sees which.
constexpr std::uint32_t watched_events = IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

// The kernel queues a close's event before it drops the closing fd's flock (__fput runs
// fsnotify_close, then locks_remove_file), so the attempt right after a wake-up may still find
// the lock held, and no later event will come for that release. After a wake-up, the next sleep
// ends this soon for one more attempt.
constexpr std::chrono::milliseconds recheck_after_wake{5};

}  // namespace

lock_file_watch::lock_file_watch(const lock_directory& dir, std::string file_name)
    : dir_(dir), file_name_(std::move(file_name)), where_(dir.where(file_name_)) {
  inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_) throw std::system_error(errno, std::generic_category(), "inotify_init1");
  std::error_code ec;
  rearm(ec);
  if (ec) throw std::system_error(ec, "watching " + where_);
}

void lock_file_watch::rearm(std::error_code& ec) {
  if (watch_ >= 0) ::inotify_rm_watch(inotify_.get(), watch_);
  watch_ = -1;
  file_.reset();
  file_ = open_lock_file(dir_.fd(), file_name_, where_, ec);
  if (!file_) return;
  struct stat opened {};
  if (::fstat(file_.get(), &opened) != 0) {
    ec = std::error_code(errno, std::generic_category());
    return;
  }
  if (!S_ISREG(opened.st_mode)) {
    file_.reset();
    set_error(ec, errc::backend_error, "lock file " + where_ + " is not a regular file");
    return;
  }
  device_ = opened.st_dev;
  inode_ = opened.st_ino;
  // The watch goes on the inode our fd refers to (/proc's link to it), not on whatever the name
  // points to by then; without /proc, on the name, which an attempt re-checks (still_names).
  const std::string by_fd = "/proc/self/fd/" + std::to_string(file_.get());
  watch_ = ::inotify_add_watch(inotify_.get(), by_fd.c_str(), watched_events);
  if (watch_ < 0) watch_ = ::inotify_add_watch(inotify_.get(), where_.c_str(), watched_events);
  if (watch_ < 0) ec = std::error_code(errno, std::generic_category());
}

std::optional<held_file> lock_file_watch::try_flock(int operation, std::error_code& ec) {
  for (int attempt = 0; attempt < max_replacement_retries; ++attempt) {
    if (!file_) {
      rearm(ec);
      if (ec) return std::nullopt;
    }
    int rc;
    do {
      rc = ::flock(file_.get(), operation | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      // Ours only if the name still refers to the inode we locked (the unlink race).
      if (still_names(dir_.fd(), file_name_, device_, inode_)) return held_file{std::move(file_), device_, inode_, 0};
      ::flock(file_.get(), LOCK_UN);
    } else if (errno != EWOULDBLOCK) {
      set_error(ec, errc::backend_error, "cannot flock " + where_ + ": " + std::strerror(errno));
      return std::nullopt;
    } else if (still_names(dir_.fd(), file_name_, device_, inode_)) {
      return std::nullopt;  // held, on the file the name refers to
    }
    rearm(ec);  // replaced while we watched it: the new file may well be free
    if (ec) return std::nullopt;
  }
  set_error(ec, errc::backend_error, replaced_too_often(where_));
  return std::nullopt;
}

void lock_file_watch::wait_until(clock::time_point until) noexcept {
  if (woken_) {
    woken_ = false;
    until = std::min(until, clock::now() + recheck_after_wake);
  }
  for (;;) {
    const auto now = clock::now();
    if (now >= until) return;
    if (spi::stop_requested()) return;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    // A stop request has no descriptor to poll: with a token that can be stopped, the kernel wait
    // is cut into slices after which it is looked at.
    if (spi::current_stop_token().stop_possible()) left = std::min<long long>(left, spi::stop_poll_slice.count());
    pollfd p{inotify_.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (n > 0) {
      // Drain: one wake-up for every event queued so far. What they were does not matter, the
      // next attempt finds out.
      alignas(inotify_event) std::array<char, 4096> buffer;
      while (::read(inotify_.get(), buffer.data(), buffer.size()) > 0) {
      }
      woken_ = true;
      return;
    }
    if (n < 0 && errno != EINTR) {
      (void)spi::sleep_until(until);  // cannot wait in the kernel: the caller polls
      return;
    }
  }
}

}  // namespace dlock::file
