#include "command_group.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <termios.h>
#include <thread>
#include <unistd.h>
#include <utility>

extern char** environ;

namespace dlock::cli {
namespace {

constexpr char goodbye = 'G';                            // dlock ends normally: the watcher must not kill anything
constexpr auto kill_timeout = std::chrono::seconds(10);  // SIGKILL is final; this only bounds a stuck (D state) exit

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

void write_all(int fd, const char* text) noexcept { [[maybe_unused]] auto n = ::write(fd, text, std::strlen(text)); }

// The go and watcher "pipes" are socket pairs: one byte sent with MSG_NOSIGNAL to a peer that
// died is an error, not a SIGPIPE that would kill dlock; end of file works as with a pipe.
void channel(int fds[2]) {
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair");
}

void send_byte(int fd, char byte) noexcept { [[maybe_unused]] auto n = ::send(fd, &byte, 1, MSG_NOSIGNAL); }

// After fork, only async-signal-safe calls: the handlers dlock installed would post the
// signals to dlock's own event pipe, so they go back to the default before anything can arrive.
void reset_signals_in_child() noexcept {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Keeps only `keep` (moved to fd 0): the watcher must not hold dlock's server connections (a
// session-bound lock is freed only when the last copy of its socket closes) or the stdout pipe
// a caller waits on.
void close_all_but(int keep, int max_fd) noexcept {
  if (keep != 0) {
    ::dup2(keep, 0);
  }
  if (::close_range(1, ~0U, 0) != 0)
    for (int fd = 1; fd < max_fd; ++fd) ::close(fd);
}

std::vector<int>& inherited_fds() {
  static std::vector<int> fds;
  return fds;
}

// Closes every descriptor but those in `keep` (sorted): only close_range/close, async-signal-safe.
void close_all_except(const std::vector<int>& keep, int max_fd) noexcept {
  int next = 0;
  for (int k : keep) {
    if (k > next && ::close_range(static_cast<unsigned>(next), static_cast<unsigned>(k - 1), 0) != 0)
      for (int fd = next; fd < k; ++fd) ::close(fd);
    next = k + 1;
  }
  if (::close_range(static_cast<unsigned>(next), ~0U, 0) != 0)
    for (int fd = next; fd < max_fd; ++fd) ::close(fd);
}

int max_fd() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 1 << 20)
    return 1 << 20;
  return static_cast<int>(limit.rlim_cur);
}

}  // namespace

void remember_inherited_fds() {
  auto& fds = inherited_fds();
  fds.clear();
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) {  // no /proc: keep the standard three, the descriptors a command is owed
    fds = {0, 1, 2};
    return;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' && fd != ::dirfd(dir)) fds.push_back(fd);
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
}

command_group::command_group(const std::vector<std::string>& command, const std::vector<std::string>& extra_env) {
  // Orphans of the group are re-parented to us instead of init: we reap them, and so know when
  // the group is empty (a zombie still counts as a member of its group).
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw_errno("prctl(PR_SET_CHILD_SUBREAPER)");
  spawn(command, extra_env);
  try {
    start_watcher();
  } catch (...) {
    signal(SIGKILL);
    wait_until_empty(std::chrono::steady_clock::now() + kill_timeout);
    ::close(go_pipe_);
    throw;
  }
  if (::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp() && ::tcsetpgrp(STDIN_FILENO, leader_) == 0)
    terminal_ = STDIN_FILENO;
  // Only now may the command start: from here on, nothing it starts can outlive dlock.
  send_byte(go_pipe_, 'g');
  ::close(go_pipe_);
  go_pipe_ = -1;
}

command_group::~command_group() {
  if (!empty()) {
    signal(SIGKILL);
    wait_until_empty(std::chrono::steady_clock::now() + kill_timeout);
  }
  if (terminal_ >= 0) give_terminal_to(::getpgrp());
  send_byte(watcher_pipe_, goodbye);
  ::close(watcher_pipe_);
  int status = 0;
  while (::waitpid(watcher_, &status, 0) < 0 && errno == EINTR) {
  }
}

// Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
void command_group::spawn(const std::vector<std::string>& command, const std::vector<std::string>& extra_env) {
  std::vector<char*> argv;
  for (auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage(extra_env);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) {
    bool overridden = false;
    for (auto& x : extra_env)
      if (std::strncmp(*e, x.c_str(), x.find('=') + 1) == 0) overridden = true;
    if (!overridden) envp.push_back(*e);
  }
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);

  int go[2];
  channel(go);
  std::vector<int> keep = inherited_fds();  // and the go pipe's read end until exec closes it
  keep.insert(std::upper_bound(keep.begin(), keep.end(), go[0]), go[0]);
  const int fd_limit = max_fd();
  const pid_t dlock_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(go[0]);
    ::close(go[1]);
    throw_errno("fork");
  }
  if (pid == 0) {
    reset_signals_in_child();
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != dlock_pid) ::_exit(127);  // dlock died before PDEATHSIG was armed
    close_all_except(keep, fd_limit);            // also go[1], so that dlock's death reads as end of file
    char byte;
    ssize_t n;
    while ((n = ::read(go[0], &byte, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) ::_exit(127);  // dlock died before the watcher was in place: start nothing
    ::execvpe(argv[0], argv.data(), envp.data());
    write_all(STDERR_FILENO, "dlock run: cannot execute the command\n");
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we signal it (no race with the child)
  ::close(go[0]);
  leader_ = pid;
  go_pipe_ = go[1];
}

void command_group::start_watcher() {
  int pipe_fds[2];
  channel(pipe_fds);
  const int fd_limit = max_fd();
  const pid_t group = leader_;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw_errno("fork");
  }
  if (pid == 0) {
    // Its own process group, deaf to the job-control signals: a Ctrl-C or a kill of dlock's
    // group must not take the watcher along with dlock.
    reset_signals_in_child();
    ::setpgid(0, 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE})
      ::sigaction(sig, &ignore, nullptr);
    close_all_but(pipe_fds[0], fd_limit);
    char byte = 0;
    ssize_t n;
    while ((n = ::read(0, &byte, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1 || byte != goodbye) ::kill(-group, SIGKILL);  // dlock is gone: so is its command
    ::_exit(0);
  }
  ::close(pipe_fds[0]);
  watcher_ = pid;
  watcher_pipe_ = pipe_fds[1];
}

void command_group::signal(int sig) const noexcept { ::kill(-leader_, sig); }

std::optional<int> command_group::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-leader_, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) break;
    if (pid != leader_) continue;
    if (WIFSTOPPED(status))
      leader_stopped_ = true;
    else
      leader_status_ = status;
  }
  return leader_status_;
}

void command_group::follow_terminal_stop() {
  if (!std::exchange(leader_stopped_, false) || terminal_ < 0 || leader_status_) return;
  give_terminal_to(::getpgrp());
  ::raise(SIGTSTP);                                                      // returns when we are continued
  if (::tcgetpgrp(terminal_) == ::getpgrp()) give_terminal_to(leader_);  // fg, not bg
  signal(SIGCONT);
}

// Needs SIGTTOU blocked: after handing the terminal over, we are a background process.
void command_group::give_terminal_to(pid_t group) const noexcept {
  sigset_t ttou, saved;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &saved);
  ::tcsetpgrp(terminal_, group);
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

bool command_group::empty() const noexcept { return ::kill(-leader_, 0) != 0 && errno == ESRCH; }

void command_group::terminate(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  signal(SIGCONT);  // a stopped process acts on SIGTERM only once continued
  wait_until_empty(std::chrono::steady_clock::now() + grace);
  if (empty()) return;
  signal(SIGKILL);
  wait_until_empty(std::chrono::steady_clock::now() + kill_timeout);
}

void command_group::wait_until_empty(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    reap();
    if (empty() || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace dlock::cli
