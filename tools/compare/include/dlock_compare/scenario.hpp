#pragma once
// A named fault, run once against one backend URI: a worker_fleet contends for one name, the
// fault is injected into the holder caught inside its write, and the checker reads the history.
//   healthy       the clients contend for the run's duration, nothing is broken
//   holder-kill   the holder is SIGKILLed inside its write; how long until the next grant (vs the ttl)
//   holder-pause  the holder is SIGSTOPped inside its write for 2.5 ttls, then SIGCONTinued: the GC
//                 pause; overlaps, stale writes (naive accepted / fenced refused), unnotified losses
//   pause-before-write  the run's first holder stops itself (SIGSTOP) after its grant, between checking
//                 held() and its write, for 2.5 ttls: Kleppmann's pause; resumed, it writes with
//                 its old token, which the fenced resource refuses once a successor wrote
//   server-restart  half a second in, the server is stopped and started again through the launcher
//                 (compose/native/dlock-servers stop|start NAME); how long from the start to the next
//                 grant, and whether a holder the server forgot overlaps its successor
//   connection-kill  the holder's connection(s) ended on the server while it writes (the server's
//                 own command, as its backend declares it; server_faults.hpp): is it
//                 told before anyone else is granted, and how long from the kill to the next grant
//   server-pause  the server SIGSTOPped for 2.5 ttls while the holder writes, then resumed: does the
//                 holder learn it lost the lock meanwhile, is anyone granted while it still writes
//   masters-minority-lost, master-restarted-empty, masters-majority-lost, ensemble-leader-lost,
//   ensemble-majority-lost  independent masters or an ensemble losing members: quorum.hpp
//   partition     the holder's network link is set down for 2.5 ttls, then up (partition_fault.hpp)
//   clock-step, clock-slow  the clients' clocks faked with libfaketime (clock_faults.hpp)
//   kill-mid-acquire  client 1 is SIGKILLed inside its acquire once the server holds its lock: between
//                 the two commands of a two-command acquire (SETNX or INCR, then EXPIRE; it alone is
//                 opened with unsafe_pause_between), right after the grant where the acquire is one
//                 command; how long until the next grant, or never (kill_mid_acquire.hpp)
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock_compare/checker.hpp"
#include "dlock_compare/quorum_outcome.hpp"

namespace dlock::compare {

enum class fault {
  healthy,
  holder_kill,
  holder_pause,
  pause_before_write,
  server_restart,
  connection_kill,
  server_pause,
  masters_minority_lost,
  master_restarted_empty,
  masters_majority_lost,
  ensemble_leader_lost,
  ensemble_majority_lost,
  partition,
  clock_step,
  clock_slow,
  kill_mid_acquire
};
std::string_view to_string(fault f) noexcept;   // "healthy", "holder-kill", "holder-pause", "pause-before-write", ...
std::string_view short_name(fault f) noexcept;  // its terminal column's heading, at most 7 characters: "h-kill"
std::optional<fault> fault_named(std::string_view name) noexcept;
const std::vector<fault>& every_fault();

struct scenario_settings {
  std::filesystem::path worker_executable;
  std::vector<std::string> worker_subcommand;  // see fleet_plan::worker_subcommand
  std::string uri;                             // the ttl below is already in it
  std::string name;                            // the lock the clients contend for
  std::filesystem::path work_dir;              // an empty folder of this cell's own: history, fence
  std::uint32_t clients = 3;
  std::chrono::milliseconds duration{std::chrono::seconds(2)};  // a fault scenario may run longer
  std::chrono::milliseconds ttl{std::chrono::seconds(1)};
  // server-restart, server-pause: the launcher (DLOCK_SERVERS) and its process name for the URI's server.
  std::filesystem::path launcher;
  std::string server_process;
  // server-restart: how long the server's schemes grant nothing after its start, by design
  // (family::grants_nothing_after_start); the run lasts past it.
  std::chrono::milliseconds grants_nothing_after_start{0};
  // kill-mid-acquire: the backend's acquire is two commands and it accepts unsafe_pause_between
  // (acquire_has_two_commands(backend_info) says so).
  bool acquire_has_two_commands = false;
  // A process-scope lock: the clients are threads of one worker process (fleet_plan's
  // clients_in_one_process); only `healthy` can run so, as every fault strikes one client process.
  bool clients_in_one_process = false;
  // Where the workers' stderr goes (fleet_plan::worker_log); empty: the caller's stderr.
  std::filesystem::path worker_log;
};

// How long the scenario runs (before the workers' last acquire may wait its timeout): the fault
// scenarios run long enough for the fault and its aftermath, whatever `duration` says.
std::chrono::milliseconds run_length(fault f, const scenario_settings& s);
std::chrono::milliseconds pause_length(const scenario_settings& s);  // holder-pause: 2.5 ttls

struct scenario_result {
  check_result check;
  std::vector<std::optional<int>> worker_exit_codes;  // per client; 128+9 for the killed holder
  std::optional<std::uint32_t> victim;                // the client killed or paused
  // From the fault to the next grant to anyone; server-restart: from the server's start (the
  // launcher saw it answer) to the next grant.
  std::optional<shared_clock::duration> recovered_after;
  std::optional<shared_clock::duration> server_down_for;  // server-restart: from the stop to the start
  std::chrono::milliseconds paused_for{};
  std::string fault_not_injected;  // not empty: why (no holder was ever caught inside its write)
  // connection-kill, server-pause: from the fault to the victim's lost notification (none: never
  // told) and to the first grant to another client; server-pause's recovered_after counts from the
  // resume, server_down_for is the pause.
  std::optional<shared_clock::duration> victim_told_after;
  std::optional<shared_clock::duration> successor_granted_after;
  std::size_t connections_killed = 0;
  std::optional<quorum_outcome> quorum;  // the quorum faults (quorum.hpp): what went down, who was granted
  std::vector<std::string> fault_notes;  // a fault's own observations, appended to the cell's text
  // kill-mid-acquire: where the victim was caught ("between its acquire's two commands", "at its
  // grant").
  std::string victim_caught;
  // How long the run went on after the instant recovered_after counts from (the kill, the pause,
  // the cut, the server's start or resume): what "never granted again" means when no grant came.
  std::optional<shared_clock::duration> watched_after_fault;
};

// Runs the scenario; throws std::system_error when the workers cannot be started or the history
// cannot be read.
scenario_result run_scenario(fault f, const scenario_settings& s);

// The cell's text: "ok", or "; "-joined observations: "overlaps N (unnotified M)",
// "stale writes: accepted N / refused M", "recovered in D" / "not recovered in the run" (kill),
// "next grant after D" / "no grant after the pause began" (pause), "down D, next grant D after the start" (restart),
// "errors N" (acquire or release errors, workers that failed).
std::string observation(fault f, const scenario_result& r);

}  // namespace dlock::compare
