#pragma once
// A child process made by fork() that runs a test's body and exits with its result: how the
// backends' own tests put a second holder in another process (a lock, a reader, a permit) and
// SIGKILL it. Header-only: the body is a template.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlock::testing {

// Runs `body` (returning the exit code) in a child process; returns the child's pid to the parent.
// The child leaves with _exit: no atexit handlers or gtest teardown of the parent's copy run
// twice. A body that throws exits with 1. The body must use nothing of the parent's that does not
// survive fork (threads, connections): open its own backend.
template <class Body>
pid_t fork_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

// Waits for the child `pid`: its exit code, or 128 + the signal that ended it (as a shell says).
inline int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace dlock::testing
