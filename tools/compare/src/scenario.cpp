#include "dlock_compare/scenario.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

#include "dlock_compare/clock_faults.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/kill_mid_acquire.hpp"
#include "dlock_compare/launcher_processes.hpp"
#include "dlock_compare/partition_fault.hpp"
#include "dlock_compare/quorum.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_compare/server_scenarios.hpp"
#include "dlock_compare/worker_fleet.hpp"
#include "fault_steps.hpp"

namespace dlock::compare {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Each fault's name, and the short one (at most 7 characters) heading its column in the terminal's
// table, where 16 columns and the longest scheme must fit 160 characters.
struct fault_name {
  fault value;
  std::string_view name;
  std::string_view short_name;
};
constexpr std::array<fault_name, 16> fault_names = {
    {{fault::healthy, "healthy", "healthy"},
     {fault::holder_kill, "holder-kill", "h-kill"},
     {fault::holder_pause, "holder-pause", "h-pause"},
     {fault::pause_before_write, "pause-before-write", "p-b-w"},
     {fault::server_restart, "server-restart", "restart"},
     {fault::connection_kill, "connection-kill", "c-kill"},
     {fault::server_pause, "server-pause", "s-pause"},
     {fault::masters_minority_lost, "masters-minority-lost", "m-minor"},
     {fault::master_restarted_empty, "master-restarted-empty", "m-empty"},
     {fault::masters_majority_lost, "masters-majority-lost", "m-major"},
     {fault::ensemble_leader_lost, "ensemble-leader-lost", "e-lead"},
     {fault::ensemble_majority_lost, "ensemble-majority-lost", "e-major"},
     {fault::partition, "partition", "part"},
     {fault::clock_step, "clock-step", "c-step"},
     {fault::clock_slow, "clock-slow", "c-slow"},
     {fault::kill_mid_acquire, "kill-mid-acquire", "mid-acq"}}};

// A critical section long enough to catch its holder inside it from outside (the history is
// polled every 10 ms); a healthy run keeps it short, for many handoffs; across a server restart
// the holder writes for two ttls, so that a server that forgets it can let a successor in while
// it still writes.
milliseconds work_length(fault f, const scenario_settings& s) {
  if (f == fault::healthy) return 10ms;
  if (f == fault::connection_kill) return 2 * s.ttl;  // outlasts the holder's chance to be told
  if (f == fault::server_pause) return 3 * s.ttl;     // outlasts the 2.5-ttl pause: still writing at the resume
  return f == fault::server_restart ? 2 * s.ttl : 200ms;
}

fleet_plan plan_for(fault f, const scenario_settings& s) {
  auto plan = fault_steps::plan(s, work_length(f, s), run_length(f, s));
  if (f == fault::pause_before_write) plan.stop_once_marker = s.work_dir / "stopped-client";
  if (f == fault::kill_mid_acquire) prepare_kill_mid_acquire(plan, s);
  return plan;
}

// pause-before-write: the client named in the marker once it has stopped itself. Bounded by the run.
std::optional<std::uint32_t> client_stopped_by_itself(const worker_fleet& fleet, const fleet_plan& plan) {
  std::uint32_t client = 0;
  while (client == 0 && shared_clock::now() < fleet.stop_at()) {
    std::this_thread::sleep_for(10ms);
    std::ifstream marker(plan.stop_once_marker);
    marker >> client;  // stays 0 until the client has written its id
  }
  if (client == 0 || client > fleet.size() || !fault_steps::wait_stopped(fleet.pid(client), fleet.stop_at()))
    return std::nullopt;
  return client;
}

struct restart {
  instant stopped_at, started_at;
};

constexpr milliseconds restart_at{500};  // into the run

// Stops the server half a second into the run and starts it again (the launcher's start waits
// until it answers). Returns when, or nullopt with why the fault could not be injected.
std::optional<restart> restart_server(const worker_fleet& fleet, const scenario_settings& s, std::string& why_not) {
  sleep_until(fleet.start_at() + restart_at);
  const auto stopped_at = shared_clock::now();
  launcher_processes server(s.launcher);  // starts it again whatever happens: a run never leaves a server down
  if (!server.stop(s.server_process)) {
    why_not = "the launcher could not stop " + s.server_process;
    return std::nullopt;
  }
  if (!server.start(s.server_process)) {
    why_not = "the launcher could not start " + s.server_process + " again";
    return std::nullopt;
  }
  return restart{stopped_at, shared_clock::now()};
}

// The victim is stopped: leaves it so for 2.5 ttls, resumes it, waits for the fleet.
void pause_then_resume(worker_fleet& fleet, const fleet_plan& plan, std::uint32_t victim, const scenario_settings& s,
                       scenario_result& r) {
  const auto paused_at = shared_clock::now();
  std::this_thread::sleep_for(pause_length(s));
  // Read before the SIGCONT: a grant it lets happen must come after the pause's end, even when this
  // thread loses its core between the signal and the clock (as it did beside the sanitizer builds).
  r.paused_for = std::chrono::duration_cast<milliseconds>(shared_clock::now() - paused_at);
  ::kill(fleet.pid(victim), SIGCONT);
  r.worker_exit_codes = fleet.wait(fault_steps::wait_deadline(fleet, plan));
  r.recovered_after = time_to_recover(assemble_sections(read_history(plan.history)), paused_at);
  r.watched_after_fault = fleet.stop_at() - paused_at;
}

}  // namespace

std::string_view to_string(fault f) noexcept {
  for (const auto& n : fault_names)
    if (n.value == f) return n.name;
  return "?";
}

std::string_view short_name(fault f) noexcept {
  for (const auto& n : fault_names)
    if (n.value == f) return n.short_name;
  return "?";
}

std::optional<fault> fault_named(std::string_view name) noexcept {
  for (const auto& n : fault_names)
    if (n.name == name) return n.value;
  return std::nullopt;
}

const std::vector<fault>& every_fault() {
  static const std::vector<fault> all = {fault::healthy,
                                         fault::holder_kill,
                                         fault::holder_pause,
                                         fault::pause_before_write,
                                         fault::server_restart,
                                         fault::connection_kill,
                                         fault::server_pause,
                                         fault::masters_minority_lost,
                                         fault::master_restarted_empty,
                                         fault::masters_majority_lost,
                                         fault::ensemble_leader_lost,
                                         fault::ensemble_majority_lost,
                                         fault::partition,
                                         fault::clock_step,
                                         fault::clock_slow,
                                         fault::kill_mid_acquire};
  return all;
}

milliseconds pause_length(const scenario_settings& s) { return s.ttl * 5 / 2; }

milliseconds run_length(fault f, const scenario_settings& s) {
  switch (f) {
    case fault::healthy: return s.duration;
    case fault::holder_kill:
      return std::max(s.duration, 3 * s.ttl + 500ms);  // the wait for the dead holder's ttl, then handoffs
    case fault::holder_pause:
      return std::max(s.duration, pause_length(s) + s.ttl + 500ms);  // the pause, then its aftermath
    case fault::pause_before_write: return std::max(s.duration, pause_length(s) + s.ttl + 500ms);
    case fault::server_restart:
      // A SQL server takes seconds to start; a server that grants nothing for a while after its
      // start (family::grants_nothing_after_start) must still grant inside the run.
      return std::max({s.duration, 3 * s.ttl + 5s, restart_at + 5s + s.grants_nothing_after_start + s.ttl});
    case fault::connection_kill:
      return std::max(s.duration, 4 * s.ttl + 2s);  // the 2-ttl write, a ttl's wait, handoffs
    case fault::server_pause:
      return std::max(s.duration, pause_length(s) + 3 * s.ttl + 1s);  // the pause, the write's rest, handoffs
    case fault::masters_minority_lost:
    case fault::master_restarted_empty:
    case fault::masters_majority_lost:
    case fault::ensemble_leader_lost:
    case fault::ensemble_majority_lost: return quorum_run_length(f, s);
    case fault::partition: return partition_run_length(s);
    case fault::clock_step:
    case fault::clock_slow: return clock_fault_run_length(f, s);
    case fault::kill_mid_acquire: return kill_mid_acquire_run_length(s);
  }
  return s.duration;
}

scenario_result run_scenario(fault f, const scenario_settings& s) {
  if (is_quorum_fault(f)) return run_quorum_scenario(f, s);
  if (f == fault::partition) return run_partition(s);
  if (f == fault::clock_step) return run_clock_step(s);
  if (f == fault::clock_slow) return run_clock_slow(s);
  auto plan = plan_for(f, s);
  // connection-kill on a session_proxy family: the workers connect through a proxy that can silence the holder.
  const auto blackhole = f == fault::connection_kill ? session_blackhole_for(s.uri) : nullptr;
  if (blackhole) plan.uri = routed_through(s.uri, blackhole->port());
  scenario_result r;
  {
    worker_fleet fleet(plan);  // its destructor kills and reaps every worker, a stopped one too
    if (f == fault::server_restart) {
      if (const auto restarted = restart_server(fleet, s, r.fault_not_injected)) {
        r.server_down_for = restarted->started_at - restarted->stopped_at;
        r.worker_exit_codes = fleet.wait(fault_steps::wait_deadline(fleet, plan));
        r.recovered_after = time_to_recover(assemble_sections(read_history(plan.history)), restarted->started_at);
        r.watched_after_fault = fleet.stop_at() - restarted->started_at;
      }
    } else if (f == fault::kill_mid_acquire) {
      run_kill_mid_acquire(fleet, plan, s, r);
    } else if (f == fault::pause_before_write) {
      r.victim = client_stopped_by_itself(fleet, plan);
      if (r.victim)
        pause_then_resume(fleet, plan, *r.victim, s, r);
      else
        r.fault_not_injected = "no client stopped itself before its first write";
    } else if (f != fault::healthy) {
      sleep_until(fleet.start_at());
      r.victim = fault_steps::stop_a_holder_inside_its_write(fleet, plan);
      if (!r.victim) {
        r.fault_not_injected = "no holder was caught inside its write";
      } else if (f == fault::connection_kill) {
        kill_holder_connections(fleet, plan, *r.victim, s, blackhole.get(), fault_steps::wait_deadline(fleet, plan), r);
      } else if (f == fault::server_pause) {
        pause_server(fleet, plan, *r.victim, s, fault_steps::wait_deadline(fleet, plan), r);
      } else if (f == fault::holder_kill) {
        const auto killed_at = shared_clock::now();
        ::kill(fleet.pid(*r.victim), SIGKILL);
        r.worker_exit_codes = fleet.wait(fault_steps::wait_deadline(fleet, plan));
        r.recovered_after = time_to_recover(assemble_sections(read_history(plan.history)), killed_at);
        r.watched_after_fault = fleet.stop_at() - killed_at;
      } else {
        pause_then_resume(fleet, plan, *r.victim, s, r);
      }
    }
    if (r.worker_exit_codes.empty()) r.worker_exit_codes = fleet.wait(fault_steps::wait_deadline(fleet, plan));
  }
  const auto events = read_history(plan.history);
  r.check = check(std::span<const event>(events));
  return r;
}

std::string observation(fault f, const scenario_result& r) {
  if (is_quorum_fault(f)) return quorum_observation(f, r);
  auto parts = fault_steps::checker_observations(r);
  const auto& c = r.check;
  if (f == fault::server_restart && r.server_down_for)
    parts.push_back("down " + fault_steps::seconds(*r.server_down_for) + ", " +
                    (r.recovered_after ? "next grant " + fault_steps::seconds(*r.recovered_after) + " after the start"
                                       : "no grant after the start"));
  if (f == fault::holder_kill && r.victim)
    parts.push_back(r.recovered_after ? "recovered in " + fault_steps::seconds(*r.recovered_after)
                                      : "not recovered in the run");
  if (f == fault::kill_mid_acquire && r.victim) parts.push_back(kill_mid_acquire_observation(r));
  // A lock that stays with its paused holder is safe but unavailable: the cell says for how long.
  if ((f == fault::holder_pause || f == fault::pause_before_write) && r.victim)
    parts.push_back(r.recovered_after ? "next grant after " + fault_steps::seconds(*r.recovered_after)
                                      : "no grant after the pause began");
  if (f == fault::connection_kill && r.connections_killed > 0)
    parts.push_back(
        (r.paused_for.count() > 0 ? "silenced " : "killed ") + std::to_string(r.connections_killed) + " connection(s)" +
        (r.paused_for.count() > 0 ? " for " + fault_steps::seconds(r.paused_for) + " (session expiry)" : "") + "; " +
        notification_text(r, "kill") +
        (r.recovered_after ? "; next grant " + fault_steps::seconds(*r.recovered_after) + " after the kill"
                           : "; no grant after the kill"));
  if (f == fault::server_pause && r.server_down_for)
    parts.push_back("paused " + fault_steps::seconds(*r.server_down_for) + "; " + notification_text(r, "pause") + "; " +
                    (r.recovered_after ? "next grant " + fault_steps::seconds(*r.recovered_after) + " after the resume"
                                       : "no grant after the resume"));
  std::uint64_t failed_workers = 0;
  for (std::size_t i = 0; i < r.worker_exit_codes.size(); ++i) {
    const bool killed_on_purpose =
        (f == fault::holder_kill || f == fault::kill_mid_acquire) && r.victim && *r.victim == i + 1;
    if (!killed_on_purpose && r.worker_exit_codes[i] != std::optional<int>(0)) ++failed_workers;
  }
  parts.insert(parts.end(), r.fault_notes.begin(), r.fault_notes.end());
  const auto errors = c.totals.acquire_errors + c.totals.release_errors + failed_workers;
  if (errors > 0) parts.push_back("errors " + std::to_string(errors));
  if (parts.empty()) return "ok";
  std::string text = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) text += "; " + parts[i];
  return text;
}

}  // namespace dlock::compare
