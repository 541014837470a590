#include "dlock_compare/launcher_processes.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

extern char** environ;

namespace dlock::compare {

int run_launcher(const std::filesystem::path& launcher, const char* verb, const std::string& process, bool kill) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const std::string path = launcher.string();
  std::string kill_flag = "--kill";
  std::vector<char*> argv = {const_cast<char*>(path.c_str()), const_cast<char*>(verb)};
  if (kill) argv.push_back(kill_flag.data());
  argv.push_back(const_cast<char*>(process.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool launcher_processes::stop(const std::string& process, bool crash) {
  // Recorded before the stop: a stop that failed halfway must still be undone.
  if (std::ranges::find(down_, process) == down_.end()) down_.push_back(process);
  return run_launcher(launcher_, "stop", process, crash) == 0;
}

bool launcher_processes::start(const std::string& process) {
  const auto it = std::ranges::find(down_, process);
  if (it == down_.end()) return true;
  if (run_launcher(launcher_, "start", process) != 0) return false;
  down_.erase(it);
  return true;
}

bool launcher_processes::start_all() {
  bool all = true;
  for (const auto& process : std::vector<std::string>(down_)) all = start(process) && all;
  return all;
}

}  // namespace dlock::compare
