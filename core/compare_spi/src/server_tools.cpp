#include "dlock/compare_spi/server_tools.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <utility>

extern char** environ;

namespace dlock::compare_spi {

tool_run run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  tool_run r;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const auto& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    r.output = argv[0] + ": cannot be run (is it installed?)";
    return r;
  }
  char buf[4096];
  for (;;) {
    const auto n = ::read(out[0], buf, sizeof buf);
    if (n > 0)
      r.output.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string port_list(const std::vector<std::uint16_t>& ports) {
  std::string list;
  for (const auto p : ports) list += (list.empty() ? "" : ",") + std::to_string(p);
  return list;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

killed_connections no_kill(std::string why) {
  killed_connections k;
  k.not_injected = std::move(why);
  return k;
}

}  // namespace dlock::compare_spi
