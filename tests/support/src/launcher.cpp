// The native server launcher (compose/native/dlock-servers) as the backends' fault tests drive it:
// stop and start a server process, find its pid. DLOCK_SERVERS (exported by the launcher) names it.
#include <sys/wait.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
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

stopped_server::stopped_server(std::string process) : process_(std::move(process)) {
  stopped_ = run_launcher("stop " + process_) == 0;
}

bool stopped_server::start() {
  if (stopped_) stopped_ = run_launcher("start " + process_) != 0;
  return !stopped_;
}

bool fires_within(std::stop_token token, std::chrono::milliseconds bound) {
  std::mutex m;
  std::condition_variable fired_cv;
  bool fired = false;
  std::stop_callback on_fire(token, [&] {
    std::lock_guard lock(m);
    fired = true;
    fired_cv.notify_all();
  });
  std::unique_lock lock(m);
  return fired_cv.wait_for(lock, bound, [&] { return fired; });
}

pid_t launcher_pid(std::string_view process) {
  const auto command = launcher_path() + " pid " + std::string(process) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen(command.c_str(), "r"), ::pclose);
  int pid = -1;
  if (!out || std::fscanf(out.get(), "%d", &pid) != 1) return -1;
  return static_cast<pid_t>(pid);
}

}  // namespace dlock::testing
