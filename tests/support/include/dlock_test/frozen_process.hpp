#pragma once
// A launcher process frozen (SIGSTOP) for the life of the guard: a server that accepts connections
// and reads nothing, as in a long GC or VM pause.
#include <signal.h>

#include <string_view>

#include "dlock_test/support.hpp"

namespace dlock::testing {

// SIGSTOPs one of the launcher's processes ("redis", "redis-sentinel.2"); SIGCONT by thaw() or when
// the scope ends, also after a failed ASSERT.
class frozen_process {
 public:
  explicit frozen_process(std::string_view process) : pid_(launcher_pid(process)) {
    if (pid_ > 0 && ::kill(pid_, SIGSTOP) != 0) pid_ = -1;
  }
  ~frozen_process() { thaw(); }
  frozen_process(const frozen_process&) = delete;
  frozen_process& operator=(const frozen_process&) = delete;

  // The process was found and stopped (and not thawed since).
  bool frozen() const noexcept { return pid_ > 0; }
  void thaw() noexcept {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

}  // namespace dlock::testing
