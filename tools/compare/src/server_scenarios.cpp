#include "dlock_compare/server_scenarios.hpp"

#include <signal.h>

#include <cstdio>
#include <thread>

#include "dlock/uri.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_compare/server_faults.hpp"

namespace dlock::compare {

namespace {

// From `fault_at`: the victim's lost notification in the section it held then, and the first
// grant to any other client; with the first grant to anyone (recovered_after) measured from `recovery_from`.
void measure(const fleet_plan& plan, std::uint32_t victim, instant fault_at, instant recovery_from,
             scenario_result& r) {
  const auto sections = assemble_sections(read_history(plan.history));
  r.recovered_after = time_to_recover(sections, recovery_from);
  for (const auto& s : sections) {
    if (s.client == victim && s.granted && *s.granted <= fault_at && s.lost && *s.lost >= fault_at &&
        (!s.release_done || *s.release_done >= fault_at))
      r.victim_told_after = *s.lost - fault_at;
    if (s.client != victim && s.granted && *s.granted > fault_at &&
        (!r.successor_granted_after || *s.granted - fault_at < *r.successor_granted_after))
      r.successor_granted_after = *s.granted - fault_at;
  }
}

std::string seconds(shared_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fs", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

std::unique_ptr<session_blackhole> session_blackhole_for(const std::string& uri) {
  const auto u = dlock::uri::parse(uri);
  const auto* family = family_of_scheme(u.scheme());
  if (family == nullptr || family->kill != connection_kill::session_proxy || u.hosts().size() != 1) return nullptr;
  return std::make_unique<session_blackhole>(u.hosts().front().host, server_port_of(uri));
}

void kill_holder_connections(worker_fleet& fleet, const fleet_plan& plan, std::uint32_t victim,
                             const scenario_settings& s, session_blackhole* blackhole, instant deadline,
                             scenario_result& r) {
  auto killed_at = shared_clock::now();
  killed_connections killed;
  if (blackhole != nullptr) {
    killed.count = blackhole->blackhole(fleet.pid(victim), killed_at + pause_length(s));
    if (killed.count == 0) killed.not_injected = "the holder has no connection through the proxy";
    r.paused_for = pause_length(s);
  } else {
    killed = kill_connections_on_server(s.uri, tcp_ports_to(fleet.pid(victim), server_port_of(s.uri)));
    // From the start of the tool that ends them (not of the listing before it): a successor may be
    // granted while that tool is still exiting, so not from its end either.
    killed_at = killed.issued_at.value_or(killed_at);
  }
  ::kill(fleet.pid(victim), SIGCONT);
  r.connections_killed = killed.count;
  if (killed.count == 0) r.fault_not_injected = killed.not_injected;
  r.worker_exit_codes = fleet.wait(deadline);
  if (killed.count > 0) measure(plan, victim, killed_at, killed_at, r);
  r.watched_after_fault = fleet.stop_at() - killed_at;
}

void pause_server(worker_fleet& fleet, const fleet_plan& plan, std::uint32_t victim, const scenario_settings& s,
                  instant deadline, scenario_result& r) {
  frozen_server server(s.launcher, s.server_process);
  const auto paused_at = shared_clock::now();
  ::kill(fleet.pid(victim), SIGCONT);  // the holder goes on writing against a frozen server
  if (!server.frozen()) {
    r.fault_not_injected = server.why_not();
  } else {
    std::this_thread::sleep_for(pause_length(s));
    server.resume();
  }
  const auto resumed_at = shared_clock::now();
  if (server.why_not().empty()) {
    r.server_down_for = resumed_at - paused_at;
    r.paused_for = std::chrono::duration_cast<std::chrono::milliseconds>(resumed_at - paused_at);
  }
  r.worker_exit_codes = fleet.wait(deadline);
  if (r.fault_not_injected.empty()) measure(plan, victim, paused_at, resumed_at, r);
  r.watched_after_fault = fleet.stop_at() - resumed_at;
}

std::string notification_text(const scenario_result& r, std::string_view fault_word) {
  const std::string in = std::string(" after the ") + std::string(fault_word);
  std::string text = r.victim_told_after ? "holder told " + seconds(*r.victim_told_after) + in : "holder not told";
  text += r.successor_granted_after ? ", next grant to another " + seconds(*r.successor_granted_after) + in
                                    : ", no grant to another in the run";
  return text;
}

}  // namespace dlock::compare
