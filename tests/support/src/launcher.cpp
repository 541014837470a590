// The native server launcher (compose/native/dlock-servers) as the backends' fault tests drive it:
// stop and start a server process, find its pid. DLOCK_SERVERS (exported by the launcher) names it.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "dlock_test/support.hpp"

namespace dlock::testing {
namespace {

std::string launcher_path() {
  const char* tool = std::getenv("DLOCK_SERVERS");
  if (!tool || !*tool)
    throw std::runtime_error("DLOCK_SERVERS is not set: run the tests under compose/native/dlock-servers "
                             "(eval \"$(compose/native/dlock-servers up)\")");
  return tool;
}

}  // namespace

int run_launcher(std::string_view args) {
  const auto command = launcher_path() + " " + std::string(args) + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t launcher_pid(std::string_view process) {
  const auto command = launcher_path() + " pid " + std::string(process) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen(command.c_str(), "r"), ::pclose);
  int pid = -1;
  if (!out || std::fscanf(out.get(), "%d", &pid) != 1) return -1;
  return static_cast<pid_t>(pid);
}

}  // namespace dlock::testing
