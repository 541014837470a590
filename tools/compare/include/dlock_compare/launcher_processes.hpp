#pragma once
// Server processes stopped through the launcher (compose/native/dlock-servers stop|start NAME)
// for a quorum fault: started again by start_all() or, whatever happened, when the scope ends,
// so that a run never leaves a master or an ensemble node down.
#include <filesystem>
#include <string>
#include <vector>

namespace dlock::compare {

// `launcher VERB [--kill] PROCESS`, its output discarded; its exit status, -1 if it did not run.
int run_launcher(const std::filesystem::path& launcher, const char* verb, const std::string& process,
                 bool kill = false);

class launcher_processes {
 public:
  explicit launcher_processes(std::filesystem::path launcher) : launcher_(std::move(launcher)) {}
  ~launcher_processes() { start_all(); }
  launcher_processes(const launcher_processes&) = delete;
  launcher_processes& operator=(const launcher_processes&) = delete;

  // false: the launcher could not stop it. `crash`: SIGKILL (stop --kill), not a clean shutdown.
  bool stop(const std::string& process, bool crash = false);
  bool start(const std::string& process);  // one stopped by this object; waits until it answers
  // Every process still stopped, in the order stopped; false if one could not be started.
  bool start_all();
  const std::vector<std::string>& down() const noexcept { return down_; }

 private:
  std::filesystem::path launcher_;
  std::vector<std::string> down_;
};

}  // namespace dlock::compare
