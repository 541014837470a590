#pragma once
// The client processes of one run: one dlock_compare_worker per client, all starting to contend
// at one shared instant (or one process whose threads are the clients, for a process-scope lock).
// A scenario starts a fleet, injects its fault (SIGSTOP or SIGKILL a worker found by pid(), restart
// a server), waits for the fleet, then checks the history.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/worker.hpp"

namespace dlock::compare {

// How one client process is started, beyond the plan's common command line: a fault that must
// reach into the process from its start (a network namespace, libfaketime) sets it per client.
struct client_launch {
  // Words before the worker's executable: {"ip", "netns", "exec", "NS"} runs it in a network
  // namespace (ip execs the worker in place, so pid() is still the worker's). Looked up in PATH.
  std::vector<std::string> prefix;
  // NAME=VALUE entries added to (or replacing in) the inherited environment: LD_PRELOAD, FAKETIME.
  std::vector<std::string> environment;
  // Replaces the plan's URI for this client (a client reaching the server by another address).
  std::string uri;
  // Starts contending this long after the fleet's start_at (a head start for another client).
  std::chrono::milliseconds start_later{0};
};

struct fleet_plan {
  std::filesystem::path worker_executable;  // dlock_compare_worker
  // Words between the executable and the worker's flags: {"compare-worker"} when the program is
  // `dlock` itself (a program that runs dlock::compare::worker_main under a subcommand).
  std::vector<std::string> worker_subcommand;
  std::string uri;
  std::string name;
  std::filesystem::path history;
  std::filesystem::path fence;  // empty: <history>.fence
  // One critical-section length per client; the fleet has as many clients as entries.
  std::vector<std::chrono::milliseconds> work;
  std::chrono::milliseconds duration{std::chrono::seconds(2)};
  std::chrono::milliseconds acquire_timeout{std::chrono::seconds(1)};
  // Long enough for every process to start and open its backend before the shared start.
  std::chrono::milliseconds start_delay{500};
  // See worker_options::stop_once_marker: the first client to write stops itself; empty: none.
  std::filesystem::path stop_once_marker;
  // Per client (index = client id - 1); a client without an entry starts as the plan says.
  std::vector<client_launch> launch;
  // Every client a thread of one worker process (worker_options::threads), as a process-scope lock
  // must be run: one process, one pid for every client, the first client's work length and launch.
  bool clients_in_one_process = false;
  // Where the workers' stderr goes (appended; created if need be): the lease-lost notices, a
  // client library's connection logs. Empty: the caller's stderr.
  std::filesystem::path worker_log;
};

// The worker's command line for `o` (the one place that knows the worker's flags besides it),
// without the URI: the fleet passes it in the environment variable below, where `ps` does not
// show a password, as every dlock command reads DLOCK_URI.
inline constexpr const char* worker_uri_variable = "DLOCK_URI";
std::vector<std::string> worker_command_line(const std::filesystem::path& worker_executable, const worker_options& o);

class worker_fleet {
 public:
  // Starts every client (ids 1..N). Throws std::system_error when a process cannot be started
  // (the ones already started are killed). The workers' stdout goes to /dev/null; their stderr
  // (dlock errors, redacted) to the plan's worker_log, or else the caller's.
  explicit worker_fleet(const fleet_plan& plan);
  // SIGKILLs and reaps every worker still running (a stopped one too: SIGKILL ends it).
  ~worker_fleet();
  worker_fleet(const worker_fleet&) = delete;
  worker_fleet& operator=(const worker_fleet&) = delete;

  std::size_t size() const noexcept { return clients_; }  // clients, not processes
  pid_t pid(std::uint32_t client) const;                  // client ids start at 1; its process
  instant start_at() const noexcept { return start_at_; }
  instant stop_at() const noexcept { return stop_at_; }

  // Waits for every worker until `deadline` (shared clock); SIGKILLs the ones still running then.
  // Per process (per client, unless the clients are threads of one): the exit code, 128 + signal
  // when killed, nullopt when it had to be killed here.
  std::vector<std::optional<int>> wait(instant deadline);

 private:
  std::vector<pid_t> pids_;  // one per process
  std::vector<bool> reaped_;
  std::size_t clients_ = 0;
  std::size_t clients_per_process_ = 1;
  instant start_at_{};
  instant stop_at_{};
};

}  // namespace dlock::compare
