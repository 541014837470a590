#pragma once
// One client of a comparison run, the loop dlock_compare_worker runs in its own process (or
// several, one per thread: worker_options::threads): until `stop_at`: acquire (waiting at most acquire_timeout), write
// to the resource for `work` (the critical section: lease.held() checked before and after, lost_token watched
// throughout), release; every step is appended to the history.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

struct worker_options {
  std::string uri;
  std::string name;               // the lock every client of the run contends for
  std::filesystem::path history;  // the history file (the naive resource's log)
  std::filesystem::path fence;    // the fenced resource's state file
  std::uint32_t client = 0;
  instant start_at{};  // every client starts at the same shared instant
  instant stop_at{};   // no new acquire after this
  std::chrono::milliseconds acquire_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds work{std::chrono::milliseconds(10)};
  // The GC pause where fencing matters: at its first write, between checking held() and
  // presenting its token, the worker tries to create this file (O_EXCL); the one client of the run
  // that does writes its id into it and stops itself (SIGSTOP) until someone sends SIGCONT.
  // Empty: never stops.
  std::filesystem::path stop_once_marker;
  // Clients in this process: ids client .. client + threads - 1, each a thread with its own
  // backend object (its own dlock::open), history writer and fenced resource. More than one is
  // how a process-scope lock is run: its exclusion holds between the threads of one
  // process only. A stop-once marker then stops every client of the process.
  std::uint32_t threads = 1;
};

// What the worker did (its clients summed), for its exit line. Throws dlock::error when the URI
// cannot be opened, std::system_error when the history or fence file cannot be written (with
// several threads: the first client's error, once every thread has ended).
struct worker_summary {
  std::uint64_t attempts = 0;
  std::uint64_t grants = 0;
};
worker_summary run_worker(const worker_options& o);

}  // namespace dlock::compare
