#pragma once
// Waiting for a lock file to be released, in the kernel: an inotify watch on the lock file's inode
// and an fd of our own on it for the attempts.
//
// Why inotify, and not a blocking flock: a flock(LOCK_EX) that waits cannot be given a deadline.
// Cutting it short needs a signal (a per-thread timer delivering a signal whose handler the
// library would have to install, without SA_RESTART, in a process that may use that signal for
// itself), or a helper thread left blocked in the kernel after the caller gave up, which would
// then take the lock nobody wants and delay the real next holder. fcntl's F_OFD_SETLKW has the
// same problem and, worse, is a different lock from flock on Linux: other processes' flocks
// would not see it. inotify needs neither: the holder's release is the last close of its fd
// (IN_CLOSE_WRITE), and so is a crash (the kernel closes a dead process's fds), and poll() on the
// inotify fd takes the deadline as its timeout. The watch is armed before the attempt that
// precedes each sleep, so a release between the two is an event already queued, never missed.
//
// The attempts go through one fd kept open for the whole wait: a fresh open and close per attempt
// (as flock_file does) would itself be a close event, and the watch would wake on its own
// attempts. Other processes' attempts and waiters leaving do wake it spuriously; it then tries
// once more (a flock on our fd, no I/O) and sleeps again.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <system_error>

#include "lock_directory.hpp"
#include "lock_file.hpp"
#include "unique_fd.hpp"

namespace dlock::file {

class lock_file_watch {
 public:
  using clock = std::chrono::steady_clock;

  // Opens the lock file and arms the watch. Throws std::system_error when the kernel refuses
  // (out of inotify instances or watches): the caller then polls.
  lock_file_watch(const lock_directory& dir, std::string file_name);

  // One attempt through the watch's fd: flock(operation|LOCK_NB), then the check that the name still
  // refers to the inode locked (a lock file replaced under us is opened and watched again). The
  // held file takes the watch's fd (the wait is over); its token is 0 (name_lock::grant sets it).
  std::optional<held_file> try_flock(int operation, std::error_code& ec);

  // Until the lock file may have been released, or until `until`; after a wake-up by an event,
  // the next call returns within a few milliseconds even without another (the release may lag
  // its close event: lock_file_watch.cpp).
  void wait_until(clock::time_point until) noexcept;

 private:
  // Opens the file the name refers to now and moves the watch onto that inode.
  void rearm(std::error_code& ec);

  const lock_directory& dir_;
  std::string file_name_;
  std::string where_;
  unique_fd inotify_;
  int watch_ = -1;
  unique_fd file_;
  bool woken_ = false;  // the last wait ended on an event
  dev_t device_ = 0;    // the inode file_ refers to
  ino_t inode_ = 0;
};

}  // namespace dlock::file
