// dlock run URI NAME [--wait D] [--ttl D] [--grace D] -- CMD ARGS...: flock(1) for distributed
// locks. Holds the lock while CMD runs (the core's watchdog renews renewable leases), forwards
// SIGINT/SIGTERM/SIGHUP to CMD, and if the lease is lost kills CMD (SIGTERM, then SIGKILL after
// the grace period) and exits 70: CMD must not go on believing it is alone.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <stop_token>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"

extern char** environ;

namespace dlock::cli {
namespace {

int status_of(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);  // the shell's convention
  return exit_software;
}

// Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
pid_t spawn(const std::vector<std::string>& command, const std::vector<std::string>& extra_env) {
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
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* msg = "dlock run: cannot execute the command\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, std::strlen(msg));
    ::_exit(127);
  }
  return pid;
}

// Waits up to `grace` for the child; SIGKILL after that. Returns its wait status.
int reap_within(pid_t pid, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int wstatus = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) return wstatus;
    ::usleep(10'000);
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  return wstatus;
}

}  // namespace

int cmd_run(const arguments& argv) {
  const args a(argv, {"wait", "ttl", "grace"}, {"help"});
  if (a.flag("help")) {
    std::puts("usage: dlock run URI NAME [--wait D] [--ttl D] [--grace D] -- CMD ARGS...\n"
              "runs CMD while holding the lock NAME on URI (like flock(1)).\n"
              "  --wait D   wait at most D for the lock (default: forever; 0 = one try)\n"
              "  --ttl D    the lease's ttl on expiring backends (renewed by the watchdog)\n"
              "  --grace D  after the lease is lost: SIGTERM, then SIGKILL after D (default 2s)\n"
              "CMD gets DLOCK_FENCING_TOKEN where the backend has one, and DLOCK_LOCK_NAME.\n"
              "exit: CMD's status (128+signal if killed), 64 usage, 69 backend failure,\n"
              "      70 lock lost while CMD ran (CMD is killed), 75 not acquired in time");
    return 0;
  }
  if (a.positional().size() != 2) throw usage_error("expected URI NAME -- CMD ARGS...");
  if (!a.has_command_separator() || a.command().empty()) throw usage_error("expected '-- CMD ARGS...' after URI NAME");
  const auto grace = a.duration("grace").value_or(std::chrono::seconds(2));

  auto& events = event_pipe::instance();
  events.catch_signals();
  auto lock = open_lock(a.positional()[0], a.positional()[1], a.duration("ttl"));
  lease held = acquire_within(*lock, a.duration("wait"));
  std::stop_callback on_lost(held.lost_token(), [&events] { events.post('L'); });

  std::vector<std::string> env = {"DLOCK_LOCK_NAME=" + std::string(lock->name())};
  if (auto t = held.fencing_token()) env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(*t));
  const pid_t child = spawn(a.command(), env);

  int wstatus = 0;
  pollfd fd{events.read_fd(), POLLIN, 0};
  for (;;) {
    if (::waitpid(child, &wstatus, WNOHANG) == child) break;
    if (::poll(&fd, 1, 1000) <= 0) continue;  // the timeout re-checks the child, should SIGCHLD race
    char e;
    bool lost = false;
    while (::read(events.read_fd(), &e, 1) == 1) {
      if (e == 'L') lost = true;
      if (e == SIGINT || e == SIGTERM || e == SIGHUP) ::kill(child, e);
    }
    if (lost) {
      ::kill(child, SIGTERM);
      reap_within(child, grace);
      std::fprintf(stderr, "dlock: lock '%s' lost (%s); killed %s\n", std::string(lock->name()).c_str(),
                   held.lost_reason().message().c_str(), a.command().front().c_str());
      return exit_software;
    }
  }
  std::error_code ec;
  held.release(ec);
  if (ec) {
    std::fprintf(stderr, "dlock: lock '%s' was no longer ours when %s finished (%s): its work was not protected\n",
                 std::string(lock->name()).c_str(), a.command().front().c_str(), last_error_message().c_str());
    return exit_software;
  }
  return status_of(wstatus);
}

}  // namespace dlock::cli
