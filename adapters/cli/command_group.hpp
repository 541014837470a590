#pragma once
// The command of `dlock run` as a process group that cannot outlive its lock:
//  - the command leads a process group of its own, and every signal dlock sends it (forwarded
//    SIGINT/SIGTERM/SIGHUP, the kill when the lease is lost) goes to the whole group, so its
//    children and grandchildren stop with it;
//  - dlock is a child subreaper (PR_SET_CHILD_SUBREAPER): members whose parent died become
//    dlock's children, are reaped by it, and `empty()` sees exactly when none is left;
//  - a watcher process, forked from dlock before the command may start, SIGKILLs the group when
//    dlock dies without saying goodbye (SIGKILL, a crash): it blocks reading a socket pair whose
//    other end only dlock holds, and end of file means dlock is gone. The command itself also gets
//    PR_SET_PDEATHSIG(SIGKILL), in case the watcher was killed too.
// Out of reach: a process that leaves the group (setsid(), a daemon), and everything while dlock
// is stopped (SIGSTOP): a stopped dlock cannot stop its command; DLOCK_FENCING_TOKEN is the
// defence there (see adapters/README.md).
#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace dlock::cli {

// Records the file descriptors dlock was started with (stdin, stdout, stderr, and any the caller
// passed on purpose, as in `dlock run ... -- cmd 3<file`): the only ones the command inherits.
// Call first thing in main: a descriptor opened later is dlock's own, e.g. a client library's
// server connection without FD_CLOEXEC, and a command (or a daemon it leaves behind) holding a
// copy would keep a connection-bound lock alive after dlock is gone.
void remember_inherited_fds();

class command_group {
 public:
  // Starts `command` (PATH lookup) with `extra_env` ("KEY=value") added to the environment.
  // When dlock's stdin is the terminal and dlock runs in its foreground, the group becomes the
  // terminal's foreground group (so an interactive command can read it, and Ctrl-C reaches it).
  command_group(const std::vector<std::string>& command, const std::vector<std::string>& extra_env);
  // Kills whatever is left of the group (SIGKILL), gives the terminal back, ends the watcher.
  ~command_group();
  command_group(const command_group&) = delete;
  command_group& operator=(const command_group&) = delete;

  void signal(int sig) const noexcept;  // to every process of the group
  // Reaps the group's processes that ended; the leader's wait status once it has ended.
  std::optional<int> reap();
  // When the leader was stopped from the terminal (Ctrl-Z) while the group had the terminal:
  // takes the terminal back and stops dlock too, so the shell sees the job stopped; once dlock
  // is continued (fg), hands the terminal back if dlock has it, and continues the group.
  void follow_terminal_stop();
  bool empty() const noexcept;  // no process of the group is left
  // SIGTERM to the group, SIGKILL to what is left after `grace`; returns when none is left.
  void terminate(std::chrono::milliseconds grace);

 private:
  void spawn(const std::vector<std::string>& command, const std::vector<std::string>& extra_env);
  void start_watcher();
  void wait_until_empty(std::chrono::steady_clock::time_point deadline);
  void give_terminal_to(pid_t group) const noexcept;

  pid_t leader_ = -1;  // also the group id
  std::optional<int> leader_status_;
  bool leader_stopped_ = false;
  pid_t watcher_ = -1;
  int watcher_pipe_ =
      -1;  // our end of the watcher's socket pair; closing it without a byte makes the watcher kill the group
  int go_pipe_ = -1;   // our end of the leader's socket pair; the leader execs only after a byte arrives on it
  int terminal_ = -1;  // the terminal whose foreground group we took, or -1
};

}  // namespace dlock::cli
