#pragma once
// One byte through a pipe between a test and a child process it forked (fork_child.hpp): the
// child says "held", the parent says "let go". A pipe carries one direction: one side says, the
// other hears. Header-only, like fork_child.hpp.
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace dlock::testing {

class signal_pipe {
 public:
  signal_pipe() {
    if (::pipe(fds_) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  }
  ~signal_pipe() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  signal_pipe(const signal_pipe&) = delete;
  signal_pipe& operator=(const signal_pipe&) = delete;

  // Writes `c`; false when it could not.
  bool say(char c) const { return ::write(fds_[1], &c, 1) == 1; }

  // The byte, or 0 when every writer closed its end first (a child that died before saying it).
  // Closes this process's own write end first, so that only the other side's copy keeps the pipe
  // open: a process never hears on a pipe it says on.
  char hear() {
    if (fds_[1] >= 0) {
      ::close(fds_[1]);
      fds_[1] = -1;
    }
    char c = 0;
    return ::read(fds_[0], &c, 1) == 1 ? c : 0;
  }

 private:
  int fds_[2]{-1, -1};
};

}  // namespace dlock::testing
