#include "fault_steps.hpp"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "dlock_compare/history.hpp"

namespace dlock::compare::fault_steps {

using namespace std::chrono_literals;

fleet_plan plan(const scenario_settings& s, std::chrono::milliseconds work, std::chrono::milliseconds run) {
  fleet_plan p;
  p.worker_executable = s.worker_executable;
  p.worker_subcommand = s.worker_subcommand;
  p.uri = s.uri;
  p.name = s.name;
  p.history = s.work_dir / "history";
  p.work.assign(s.clients, work);
  p.duration = run;
  p.acquire_timeout = 2 * s.ttl + 1s;
  p.clients_in_one_process = s.clients_in_one_process;
  p.worker_log = s.worker_log;
  return p;
}

bool wait_stopped(pid_t pid, instant deadline) {
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, command, state;
    stat >> pid_field >> command >> state;  // the worker's command name has no spaces
    if (state == "T") return true;
    if (shared_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

instant wait_deadline(const worker_fleet& fleet, const fleet_plan& plan) {
  return fleet.stop_at() + plan.acquire_timeout + 20s;
}

namespace {

bool inside_its_write(std::uint32_t client, const std::filesystem::path& history) {
  std::optional<section> latest;
  for (auto& s : assemble_sections(read_history(history)))
    if (s.client == client) latest = s;
  return latest && latest->write_begin && !latest->write_end;
}

}  // namespace

std::optional<std::uint32_t> stop_a_holder_inside_its_write(const worker_fleet& fleet, const fleet_plan& plan) {
  sleep_until(fleet.start_at());
  for (int i = 0; i < 500 && shared_clock::now() < fleet.stop_at(); ++i) {
    std::this_thread::sleep_for(10ms);
    if (!std::filesystem::exists(plan.history)) continue;  // no worker has opened its backend yet (a slow connect)
    for (const auto client : holders_at_end(read_history(plan.history))) {
      if (::kill(fleet.pid(client), SIGSTOP) != 0 || !wait_stopped(fleet.pid(client), shared_clock::now() + 5s))
        continue;
      if (inside_its_write(client, plan.history)) return client;
      ::kill(fleet.pid(client), SIGCONT);
    }
  }
  return std::nullopt;
}

void finish(worker_fleet& fleet, const fleet_plan& plan, scenario_result& r) {
  r.worker_exit_codes = fleet.wait(wait_deadline(fleet, plan));
  const auto events = read_history(plan.history);
  r.check = check(std::span<const event>(events));
}

std::optional<section> section_at(const std::vector<section>& sections, std::uint32_t client, instant at) {
  std::optional<section> found;
  for (const auto& s : sections)
    if (s.client == client && s.granted && *s.granted <= at) found = s;  // ordered by attempt
  return found;
}

std::optional<instant> next_grant_to_another(const std::vector<section>& sections, std::uint32_t client, instant at) {
  std::optional<instant> first;
  for (const auto& s : sections)
    if (s.client != client && s.granted && *s.granted > at && (!first || *s.granted < *first)) first = s.granted;
  return first;
}

std::string seconds(shared_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fs", std::chrono::duration<double>(d).count());
  return buf;
}

std::vector<std::string> checker_observations(const scenario_result& r) {
  std::vector<std::string> parts;
  if (!r.fault_not_injected.empty()) parts.push_back("fault not injected: " + r.fault_not_injected);
  const auto& c = r.check;
  if (c.overlap_count() > 0)
    parts.push_back("overlaps " + std::to_string(c.overlap_count()) + " (unnotified " +
                    std::to_string(c.unnotified_losses) + ")");
  if (c.stale_writes_accepted_by_naive > 0 || c.writes_refused_by_fenced > 0)
    parts.push_back("stale writes: accepted " + std::to_string(c.stale_writes_accepted_by_naive) + " / refused " +
                    std::to_string(c.stale_writes_refused_by_fenced));
  return parts;
}

std::string notified_text(const section& victim, std::optional<instant> next_grant) {
  if (!victim.lost) return "holder never notified";
  if (!next_grant) return "holder notified (no other grant followed)";
  return *victim.lost <= *next_grant
             ? "holder notified " + seconds(*next_grant - *victim.lost) + " before the next grant"
             : "holder notified " + seconds(*victim.lost - *next_grant) + " after the next grant";
}

std::string release_text(const section& victim) {
  switch (victim.release) {
    case release_outcome::released: return "its release: released";
    case release_outcome::not_owner: return "its release: not_owner";
    case release_outcome::failed: return "its release: failed";
    case release_outcome::none: break;
  }
  return "its release: none (section unfinished)";
}

}  // namespace dlock::compare::fault_steps
