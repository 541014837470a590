#include "dlock_compare/quorum.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "dlock_compare/families.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/launcher_processes.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_compare/worker_fleet.hpp"
#include "fault_steps.hpp"

namespace dlock::compare {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

struct member {
  std::string process;  // the launcher's name: "<server>.<n>", n in URI order from 1
  std::string host;
  int port = 0;
};

// The members a URI names ("scheme://[user:pw@]h1:p1,h2:p2,.../path?query"), named as the launcher
// names them: it hands out one block of ports, process .1 first, and prints them in that order.
std::vector<member> members_of(const std::string& uri, const std::string& server) {
  std::vector<member> members;
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string::npos) return members;
  const auto from = scheme_end + 3;
  auto authority = uri.substr(from, uri.find_first_of("/?", from) - from);
  if (const auto at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  std::size_t start = 0;
  for (;;) {
    const auto comma = authority.find(',', start);
    const auto hostport = authority.substr(start, comma - start);
    const auto colon = hostport.rfind(':');
    member m;
    m.process = server + "." + std::to_string(members.size() + 1);
    m.host = hostport.substr(0, colon);
    m.port = colon == std::string::npos ? 0 : std::atoi(hostport.c_str() + colon + 1);
    members.push_back(std::move(m));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return members;
}

// The scheme of the scenario's URI ("zoo://h:p,..." -> "zoo").
std::string_view scheme_of(const std::string& uri) {
  return std::string_view(uri).substr(0, std::min(uri.find("://"), uri.size()));
}

// The session of the scenario's scheme under its ttl (ensemble_session).
milliseconds session_of(const scenario_settings& s) { return ensemble_session(scheme_of(s.uri), s.ttl); }

// The holder's critical section must span the fault and its aftermath: with independent masters
// it writes for 2 ttls (its validity runs out within one ttl of the last majority); in an
// ensemble for 3 s across an election, and for the session and 2 s when the quorum goes,
// so that its lost notification (recorded only inside the write) comes while it still writes.
milliseconds quorum_work_length(fault f, const scenario_settings& s) {
  if (f == fault::ensemble_leader_lost) return 3s;
  if (f == fault::ensemble_majority_lost) return session_of(s) + 2s;
  return 2 * s.ttl;
}

// Independent masters: how long the stopped ones stay down (one of three: 3 ttls, so that the
// holder's write of 2 ttls ends inside the outage and the lock changes hands with two masters).
// An ensemble: the leader stays down for the session and a second; the majority for the session
// and 2 s (the holder must be told in it).
milliseconds outage_length(fault f, const scenario_settings& s) {
  if (f == fault::ensemble_leader_lost) return session_of(s) + 1s;
  if (f == fault::ensemble_majority_lost) return session_of(s) + 2s;
  if (f == fault::masters_minority_lost) return 3 * s.ttl;
  return 2 * s.ttl;
}

fleet_plan quorum_plan(fault f, const scenario_settings& s) {
  return fault_steps::plan(s, quorum_work_length(f, s), quorum_run_length(f, s));
}

struct writer {
  std::uint32_t client = 0;
  std::uint32_t attempt = 0;
};

// A client whose history shows it inside a write begun at most `fresh` ago and granted after
// `granted_after`, so that its write spans what comes next. Polls every 10 ms until `deadline`.
std::optional<writer> fresh_writer(const fleet_plan& plan, instant granted_after, shared_clock::duration fresh,
                                   instant deadline) {
  while (shared_clock::now() < deadline) {
    const auto now = shared_clock::now();
    for (const auto& sec : assemble_sections(read_history(plan.history)))
      if (sec.granted && *sec.granted >= granted_after && sec.write_begin && !sec.write_end &&
          now - *sec.write_begin <= fresh)
        return writer{sec.client, sec.attempt};
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

// The member that says it leads (asked the way its family declared, family::is_leader), asked again
// every 100 ms (an election may be under way) until `deadline`.
std::optional<member> leader_of(const family& ensemble, const std::vector<member>& members, instant deadline) {
  for (;;) {
    for (const auto& m : members)
      if (ensemble.is_leader(m.host, m.port, 1s)) return m;
    if (shared_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(100ms);
  }
}

// The outcome's timings, read from the history once the fleet is done.
void measure(const std::vector<section>& sections, const std::optional<writer>& holder, instant fault_at,
             std::optional<instant> restart_begun_at, std::optional<instant> back_at, quorum_outcome& q) {
  const instant down_until = restart_begun_at.value_or(instant::max());
  std::optional<instant> other_grant;
  for (const auto& sec : sections) {
    if (!sec.granted) continue;
    if (*sec.granted >= fault_at && *sec.granted < down_until) ++q.grants_while_down;
    if (holder && sec.client != holder->client && *sec.granted > fault_at &&
        (!other_grant || *sec.granted < *other_grant))
      other_grant = sec.granted;
  }
  if (other_grant) q.other_granted_after = *other_grant - fault_at;
  q.next_grant_after_fault = time_to_recover(sections, fault_at);
  if (back_at) q.next_grant_after_back = time_to_recover(sections, *back_at);
  if (!holder) return;
  q.holder = holder->client;
  const auto it = std::ranges::find_if(
      sections, [&](const section& sec) { return sec.client == holder->client && sec.attempt == holder->attempt; });
  if (it == sections.end()) return;
  q.holder_kept_lock = !it->lost && it->release == release_outcome::released;
  if (it->lost) q.holder_told_after = *it->lost - fault_at;
  q.holder_told_before_other_grant = !other_grant || (it->lost && *it->lost < *other_grant);
}

// Stops `processes` in order, keeps them down for `outage` from the first stop, starts them again.
// Returns the first stop's instant and the instant the last start returned (nullopt: not started).
struct outage {
  instant stopped_at;
  // The harness began to start the stopped processes again: from then on one may serve (a member
  // can rejoin its ensemble, a master answer, before its start returns), so a grant is counted as
  // one while down only before this instant.
  std::optional<instant> restart_begun_at;
  std::optional<instant> back_at;  // every one did
};

std::optional<outage> take_down(launcher_processes& guard, const std::vector<std::string>& processes,
                                milliseconds length, std::string& why_not) {
  const auto stopped_at = shared_clock::now();
  for (const auto& p : processes)
    if (!guard.stop(p)) {
      why_not = "the launcher could not stop " + p;
      return std::nullopt;
    }
  sleep_until(stopped_at + length);
  const auto restart_begun_at = shared_clock::now();
  if (!guard.start_all()) return outage{stopped_at, restart_begun_at, std::nullopt};
  return outage{stopped_at, restart_begun_at, shared_clock::now()};
}

// When the masters are back, and the fault's effects on the holder and the others, once every
// worker has ended.
void finish(worker_fleet& fleet, const fleet_plan& plan, const std::optional<writer>& holder, instant fault_at,
            std::optional<instant> restart_begun_at, std::optional<instant> back_at, instant down_from,
            scenario_result& r) {
  auto& q = *r.quorum;
  if (back_at) q.down_for = *back_at - down_from;
  r.worker_exit_codes = fleet.wait(fleet.stop_at() + plan.acquire_timeout + 20s);
  measure(assemble_sections(read_history(plan.history)), holder, fault_at, restart_begun_at, back_at, q);
}

// master-restarted-empty: the third master unreachable while the lock changes hands (the next
// holder has its keys on the first two only), then back empty, then the first master crashes and
// restarts without persistence.
void restart_a_master_empty(launcher_processes& guard, const std::vector<member>& members, worker_fleet& fleet,
                            const fleet_plan& plan, instant search_until, scenario_result& r) {
  auto& q = *r.quorum;
  const auto third_down_at = shared_clock::now();
  if (!guard.stop(members[2].process)) {
    r.fault_not_injected = "the launcher could not stop " + members[2].process;
    return;
  }
  q.stopped.push_back(members[2].process);
  // Caught at once (polled every 10 ms), so that the restart lands before its first renewal,
  // as in Kleppmann's account: the holder has no reason to look until then.
  const auto holder = fresh_writer(plan, third_down_at, 100ms, search_until);
  if (!holder) {
    r.fault_not_injected = "no holder was granted while " + members[2].process + " was down";
    return;
  }
  // In this order no acquire ever finds fewer than two masters reachable, so the waiters see
  // contention, not an outage (after which a worker pauses a whole write length), and try again
  // every poll. The fault's instant is the crash: the holder told, the next grants, counted from there.
  if (!guard.start(members[2].process)) {
    r.fault_not_injected = "the launcher could not start " + members[2].process + " again";
    return;
  }
  const auto fault_at = shared_clock::now();
  if (!guard.stop(members[0].process, /*crash=*/true)) {
    r.fault_not_injected = "the launcher could not stop " + members[0].process;
    return;
  }
  q.stopped.push_back(members[0].process);
  std::optional<instant> back_at;
  if (guard.start_all()) back_at = shared_clock::now();
  r.victim = holder->client;
  finish(fleet, plan, holder, fault_at, back_at, back_at, third_down_at, r);
}

// ensemble-leader-lost: the member that says it leads stopped, its successor timed from outside
// while the outage runs.
void stop_the_leader(fault f, const scenario_settings& s, launcher_processes& guard, const std::vector<member>& members,
                     worker_fleet& fleet, const fleet_plan& plan, const std::optional<writer>& holder,
                     scenario_result& r) {
  auto& q = *r.quorum;
  const auto* ensemble = family_of_scheme(scheme_of(s.uri));
  if (ensemble == nullptr || ensemble->is_leader == nullptr) {
    r.fault_not_injected = "the ensemble's backend declares no way to ask a member whether it leads";
    return;
  }
  const auto leader = leader_of(*ensemble, members, shared_clock::now() + 5s);
  if (!leader) {
    r.fault_not_injected = "no member said it leads";
    return;
  }
  q.leader = leader->process;
  r.victim = holder->client;
  const auto stopped_at = shared_clock::now();
  if (!guard.stop(leader->process)) {
    r.fault_not_injected = "the launcher could not stop " + leader->process;
    return;
  }
  q.stopped = {leader->process};
  std::vector<member> rest;
  for (const auto& m : members)
    if (m.process != leader->process) rest.push_back(m);
  if (leader_of(*ensemble, rest, stopped_at + outage_length(f, s)))
    q.new_leader_after = shared_clock::now() - stopped_at;
  sleep_until(stopped_at + outage_length(f, s));
  const auto restart_begun_at = shared_clock::now();
  std::optional<instant> back_at;
  if (guard.start_all()) back_at = shared_clock::now();
  finish(fleet, plan, holder, stopped_at, restart_begun_at, back_at, stopped_at, r);
}

void run_fault(fault f, const scenario_settings& s, worker_fleet& fleet, const fleet_plan& plan, scenario_result& r) {
  auto& q = *r.quorum;
  const auto members = members_of(s.uri, s.server_process);
  q.members = static_cast<std::uint32_t>(members.size());
  if (members.size() != 3) {
    r.fault_not_injected = "the URI names " + std::to_string(members.size()) + " members, the fault needs 3";
    return;
  }
  launcher_processes guard(s.launcher);  // every process stopped is started again when this scope ends
  sleep_until(fleet.start_at());
  const auto search_until = fleet.stop_at() - quorum_work_length(f, s) / 2;
  const auto holder = fresh_writer(plan, fleet.start_at(), 300ms, search_until);
  if (!holder) {
    r.fault_not_injected = "no holder was seen starting its write";
    return;
  }
  if (f == fault::master_restarted_empty) return restart_a_master_empty(guard, members, fleet, plan, search_until, r);
  if (f == fault::ensemble_leader_lost) return stop_the_leader(f, s, guard, members, fleet, plan, holder, r);
  // The other faults stop their victims for the outage's length, then start them again.
  const std::vector<std::string> victims = f == fault::masters_minority_lost
                                               ? std::vector<std::string>{members[2].process}
                                               : std::vector<std::string>{members[0].process, members[1].process};
  r.victim = holder->client;
  const auto o = take_down(guard, victims, outage_length(f, s), r.fault_not_injected);
  if (!o) return;
  q.stopped = victims;
  finish(fleet, plan, holder, o->stopped_at, o->restart_begun_at, o->back_at, o->stopped_at, r);
}

}  // namespace

bool is_quorum_fault(fault f) noexcept {
  return f == fault::masters_minority_lost || f == fault::master_restarted_empty || f == fault::masters_majority_lost ||
         is_ensemble_fault(f);
}

bool is_ensemble_fault(fault f) noexcept {
  return f == fault::ensemble_leader_lost || f == fault::ensemble_majority_lost;
}

namespace {

quorum_kind quorum_kind_of(fault f) noexcept {
  if (!is_quorum_fault(f)) return quorum_kind::none;
  return is_ensemble_fault(f) ? quorum_kind::ensemble : quorum_kind::independent_masters;
}

}  // namespace

namespace {

// The family of `scheme` when it takes `f` (its family declares the fault's kind), else nullptr.
const family* quorum_family(std::string_view scheme, fault f) noexcept {
  const auto* family = family_of_scheme(scheme);
  return family != nullptr && is_quorum_fault(f) && family->quorum == quorum_kind_of(f) ? family : nullptr;
}

}  // namespace

const char* quorum_server(std::string_view scheme, fault f) noexcept {
  const auto* family = quorum_family(scheme, f);
  return family != nullptr ? family->quorum_server : nullptr;
}

const char* quorum_server_variable(std::string_view scheme, fault f) noexcept {
  const auto* family = quorum_family(scheme, f);
  return family != nullptr ? family->quorum_variable : nullptr;
}

milliseconds ensemble_session(std::string_view scheme, milliseconds ttl) {
  const auto* family = family_of_scheme(scheme);
  return family != nullptr && family->ensemble_session != nullptr ? family->ensemble_session(ttl) : ttl;
}

std::optional<std::string> quorum_not_applicable(std::string_view scheme, fault f) {
  if (!is_quorum_fault(f)) return std::nullopt;
  const auto* family = family_of_scheme(scheme);
  if (family == nullptr || family->variable == nullptr) return "no server";
  if (family->quorum == quorum_kind_of(f)) return std::nullopt;
  if (family->quorum == quorum_kind::independent_masters)
    return "independent masters, no ensemble (see the masters-* faults)";
  if (family->quorum == quorum_kind::ensemble)
    return "an ensemble, not independent masters (see the ensemble-* faults)";
  return "single server";
}

milliseconds quorum_run_length(fault f, const scenario_settings& s) {
  switch (f) {
    // the outage (3 ttls), then handoffs with every master back
    case fault::masters_minority_lost: return std::max(s.duration, 5 * s.ttl + 2s);
    // a holder seen, the third master stopped, the next holder seen (up to a write of 2 ttls), the
    // restart, the delayed restart's ttl, then handoffs
    case fault::master_restarted_empty: return std::max(s.duration, 6 * s.ttl + 3s);
    // the outage (2 ttls), the restarted masters kept out for a ttl, then handoffs
    case fault::masters_majority_lost: return std::max(s.duration, 5 * s.ttl + 2s);
    // the outage, a JVM's start (seconds on a loaded machine), then handoffs of 3 s writes
    case fault::ensemble_leader_lost: return std::max(s.duration, 2 * session_of(s) + 8s);
    case fault::ensemble_majority_lost: return std::max(s.duration, 2 * session_of(s) + 12s);
    default: return s.duration;
  }
}

scenario_result run_quorum_scenario(fault f, const scenario_settings& s) {
  const auto plan = quorum_plan(f, s);
  scenario_result r;
  r.quorum.emplace();
  {
    worker_fleet fleet(plan);  // its destructor kills and reaps every worker
    run_fault(f, s, fleet, plan, r);
    if (r.worker_exit_codes.empty()) r.worker_exit_codes = fleet.wait(fleet.stop_at() + plan.acquire_timeout + 20s);
  }
  const auto events = read_history(plan.history);
  r.check = check(std::span<const event>(events));
  return r;
}

std::string quorum_observation(fault f, const scenario_result& r) {
  auto parts = fault_steps::checker_observations(r);
  const auto& c = r.check;
  if (r.quorum && r.fault_not_injected.empty()) {
    const auto& q = *r.quorum;
    std::string what;
    if (f == fault::ensemble_leader_lost) {
      what =
          "leader " + q.leader + " stopped: " +
          (q.new_leader_after ? "new leader after " + fault_steps::seconds(*q.new_leader_after) : "no new leader seen");
    } else if (f == fault::master_restarted_empty) {
      what = q.stopped.size() == 2 ? q.stopped[0] + " back empty, then " + q.stopped[1] + " restarted empty"
                                   : "not both masters stopped";
    } else {
      what = std::to_string(q.stopped.size()) + " of " + std::to_string(q.members) + " down " +
             (q.down_for ? fault_steps::seconds(*q.down_for) : "(not started again in the run)") + ", granted " +
             std::to_string(q.grants_while_down) + "x meanwhile";
    }
    parts.push_back(what);
    if (q.holder_kept_lock)
      parts.push_back("holder kept its lock");
    else if (q.holder_told_after)
      parts.push_back(std::string("holder told after ") + fault_steps::seconds(*q.holder_told_after) +
                      (q.holder_told_before_other_grant ? "" : ", after another's grant"));
    else
      parts.push_back("holder never told");
    if (f == fault::ensemble_leader_lost)  // the election is what it costs; the old leader's return is not
      parts.push_back(q.next_grant_after_fault
                          ? "next grant " + fault_steps::seconds(*q.next_grant_after_fault) + " after the stop"
                          : "no grant after the stop");
    else if (q.next_grant_after_back)
      parts.push_back("next grant " + fault_steps::seconds(*q.next_grant_after_back) + " after all were back");
    else if (q.down_for)
      parts.push_back("no grant after all were back");
  }
  // A backend without fencing: its writes cannot be refused by a fenced resource.
  if (c.totals.writes_without_token > 0 && c.totals.writes == c.totals.writes_without_token)
    parts.push_back("no fencing token");
  std::uint64_t failed_workers = 0;
  for (const auto& code : r.worker_exit_codes)
    if (code != std::optional<int>(0)) ++failed_workers;
  // While no majority answers, an acquire fails (backend_unavailable): counted, not hidden.
  if (c.totals.acquire_errors > 0) parts.push_back("acquire errors " + std::to_string(c.totals.acquire_errors));
  if (c.totals.release_errors + failed_workers > 0)
    parts.push_back("errors " + std::to_string(c.totals.release_errors + failed_workers));
  std::string text = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) text += "; " + parts[i];
  return text;
}

std::string quorum_legend() {
  return "  D of N down E, granted Kx meanwhile\n"
         "                             masters-*/ensemble-majority-lost: D of the N masters or nodes stopped\n"
         "                             for E (to the moment the last answered again); K grants to anyone\n"
         "                             before the first of them answered again (a majority stopped: none due)\n"
         "  holder kept its lock / holder told after T [, after another's grant] / holder never told\n"
         "                             the holder caught inside its write when the fault struck: released\n"
         "                             cleanly, or its lost notification T after the fault\n"
         "  next grant E after all were back  from the last restarted process answering to the next grant\n"
         "  next grant E after the stop  ensemble-leader-lost: from the leader's stop to the next grant\n"
         "  leader P stopped: new leader after E  ensemble-leader-lost: P said it led; a remaining\n"
         "                             member said it leads E after the stop began\n"
         "  no fencing token           the backend gives no token: a stale write cannot be refused\n"
         "  acquire errors N           acquires that failed (backend_unavailable: no majority answered)\n"
         "masters-minority-lost: one of three independent masters stopped for 3 ttls, a holder inside its write;\n"
         "master-restarted-empty: one master stopped; then, the next holder writing, it is back and another\n"
         "crashes and restarts without persistence, both empty (Kleppmann's case: a second majority is free\n"
         "unless restarted masters wait a ttl); masters-majority-lost: two of three stopped for 2 ttls;\n"
         "ensemble-leader-lost: a three-member ensemble's leader stopped (the holder's session, or lease, outlasts\n"
         "an election); ensemble-majority-lost: two of its three nodes stopped for the session and 2s.\n";
}

namespace {

std::string ms_or_null(const std::optional<shared_clock::duration>& d) {
  return d ? std::to_string(std::chrono::duration<double, std::milli>(*d).count()) : std::string("null");
}

}  // namespace

std::string to_json(const quorum_outcome& q) {
  std::string stopped;
  for (const auto& p : q.stopped) stopped += (stopped.empty() ? "\"" : ", \"") + p + "\"";
  return "{\"stopped\": [" + stopped + "], \"leader\": \"" + q.leader +
         "\", \"members\": " + std::to_string(q.members) + ", \"down_for_ms\": " + ms_or_null(q.down_for) +
         ", \"grants_while_down\": " + std::to_string(q.grants_while_down) +
         ", \"new_leader_after_ms\": " + ms_or_null(q.new_leader_after) +
         ", \"holder\": " + (q.holder ? std::to_string(*q.holder) : std::string("null")) +
         ", \"holder_kept_lock\": " + (q.holder_kept_lock ? "true" : "false") +
         ", \"holder_told_after_ms\": " + ms_or_null(q.holder_told_after) +
         ", \"other_granted_after_ms\": " + ms_or_null(q.other_granted_after) +
         ", \"holder_told_before_other_grant\": " + (q.holder_told_before_other_grant ? "true" : "false") +
         ", \"next_grant_after_fault_ms\": " + ms_or_null(q.next_grant_after_fault) +
         ", \"next_grant_after_back_ms\": " + ms_or_null(q.next_grant_after_back) + "}";
}

}  // namespace dlock::compare
