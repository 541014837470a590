#include "scenario_properties.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "dlock_compare/kill_mid_acquire.hpp"
#include "dlock_compare/servers.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

std::string seconds(shared_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fs", std::chrono::duration<double>(d).count());
  return buf;
}

const section* find_section(const std::vector<section>& sections, section_id id) {
  for (const auto& s : sections)
    if (s.client == id.client && s.attempt == id.attempt) return &s;
  return nullptr;
}

// ---- who claims what, from the declaration ----

bool safe(const backend_info& i) { return i.unsafe_because.empty(); }
// A process-scope lock runs `healthy` only, its clients threads of one process (cell_setup.hpp):
// every other fault strikes one client process. So its claims are healthy's.
bool beyond_the_process(const backend_info& i) { return i.scope != lock_scope::process; }
// Exclusion between the run's clients (processes; threads of one process for a process-scope lock).
bool excludes_its_clients(const backend_info& i) { return safe(i); }
bool fences_its_clients(const backend_info& i) { return i.caps.has(capability::fencing); }
// ... under the faults, which only the locks beyond the process run.
bool excludes(const backend_info& i) { return safe(i) && beyond_the_process(i); }
bool expiring(const backend_info& i) { return i.caps.has(capability::expiring) && beyond_the_process(i); }
bool fencing_across_processes(const backend_info& i) { return fences_its_clients(i) && beyond_the_process(i); }
bool notifies(const backend_info& i) { return i.caps.has(capability::lost_notification) && beyond_the_process(i); }
// The server can be restarted through the launcher (not without a server, nor several masters);
// the unsafe rows claim nothing there.
bool safe_with_one_server(const backend_info& i) { return safe(i) && launcher_process(i.scheme) != nullptr; }
bool notifies_with_one_server(const backend_info& i) { return safe_with_one_server(i) && notifies(i); }
bool accepts(const backend_info& i, std::string_view key) {
  return std::ranges::find(i.parameters, key) != i.parameters.end();
}
// A restart guard: grants nothing for a ttl after the server (re)started, so that a holder it forgot
// has run out of validity, and been told, before anyone else is granted.
bool guards_restarts(const backend_info& i) {
  return notifies_with_one_server(i) && (accepts(i, "wait_after_restart") || accepts(i, "restart_delay"));
}

// The unsafe rows' declared failure (unsafe_because), which their test must show.
bool declares(const backend_info& i, std::string_view failure) {
  return i.unsafe_because.find(failure) != std::string::npos;
}
bool deletes_its_successors_lock(const backend_info& i) { return declares(i, "deletes its successor's lock"); }
bool two_command_acquire(const backend_info& i) { return !safe(i) && acquire_has_two_commands(i); }

// The safe scheme an unsafe one names ("...; use x:// instead"): its counterpart in the
// unsafe row's scenario.
std::string counterpart_of(const backend_info& unsafe) {
  const auto use = unsafe.unsafe_because.rfind("use ");
  const auto end = unsafe.unsafe_because.find("://", use);
  if (use == std::string::npos || end == std::string::npos) return {};
  return unsafe.unsafe_because.substr(use + 4, end - use - 4);
}
bool counterpart_of_a_two_command_acquire(const backend_info& i) {
  if (!safe(i)) return false;
  const auto all = default_registry().list();
  return std::ranges::any_of(
      all, [&](const backend_info& u) { return two_command_acquire(u) && counterpart_of(u) == i.scheme; });
}

// ---- the checks ----

void no_overlap_stale_write_or_error(const scenario_run& r) {
  const auto& c = r.result.check;
  EXPECT_EQ(c.overlap_count(), 0u) << "two clients wrote at once";
  EXPECT_EQ(c.unnotified_losses, 0u);
  EXPECT_EQ(c.stale_writes_accepted_by_naive, 0u);
  EXPECT_EQ(c.totals.acquire_errors, 0u);
  EXPECT_EQ(c.totals.release_errors, 0u);
  EXPECT_EQ(c.totals.release_not_owner, 0u) << "a release found its lock gone";
  EXPECT_GE(c.totals.grants, 2u) << "too few grants to say anything";
}

void healthy_exclusion(const scenario_run& r) {
  no_overlap_stale_write_or_error(r);
  EXPECT_EQ(r.result.check.totals.writes_begun_not_held, 0u) << "a healthy holder wrote with held() false";
}

void tokens_increase_in_write_order(const scenario_run& r) {
  EXPECT_EQ(r.result.check.totals.writes_without_token, 0u) << "the backend declares fencing";
  std::vector<const section*> writes;
  for (const auto& s : r.sections)
    if (s.wrote() && s.token) writes.push_back(&s);
  std::ranges::sort(writes, {}, [](const section* s) { return *s->write_begin; });
  for (std::size_t i = 1; i < writes.size(); ++i)
    EXPECT_LT(*writes[i - 1]->token, *writes[i]->token)
        << "client " << writes[i]->client << " wrote token " << *writes[i]->token << " after client "
        << writes[i - 1]->client << " wrote " << *writes[i - 1]->token;
}

void recovered_within_ttl(const scenario_run& r) {
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  ASSERT_TRUE(r.result.recovered_after) << "no grant followed the kill of client " << *r.result.victim;
  std::cout << "recovered " << seconds(*r.result.recovered_after) << " after the kill (ttl " << r.settings.ttl.count()
            << " ms)\n";
  EXPECT_LE(*r.result.recovered_after, r.settings.ttl + recovery_margin)
      << "a dead holder's lock freed itself only " << seconds(*r.result.recovered_after) << " after the kill";
}

void fence_refuses_every_stale_write(const scenario_run& r) {
  const auto& c = r.result.check;
  EXPECT_EQ(c.stale_writes_refused_by_fenced, c.stale_writes_accepted_by_naive)
      << "a stale write got through the fence";
  EXPECT_EQ(c.writes_refused_by_fenced, c.stale_writes_accepted_by_naive)
      << "the fence refused a write that was not stale";
}

// Kleppmann's pause: once a successor wrote a larger token, the resumed holder's write is refused.
void paused_writer_refused_after_a_successor(const scenario_run& r) {
  fence_refuses_every_stale_write(r);
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  const section* paused = nullptr;
  for (const auto& s : r.sections)
    if (s.client == *r.result.victim && s.wrote() && !paused) paused = &s;  // it stopped at its first write
  ASSERT_NE(paused, nullptr) << "the paused client never wrote";
  ASSERT_TRUE(paused->token);
  const bool successor_wrote_first = std::ranges::any_of(r.sections, [&](const section& s) {
    return s.client != paused->client && s.wrote() && s.token &&
           *s.write_begin<*paused->write_begin&& * s.token> * paused->token;
  });
  std::cout << "a successor wrote during the pause: "
            << (successor_wrote_first ? "yes" : "no (the lock stayed with its paused holder)")
            << "; the resumed write was " << to_string(paused->verdict) << "\n";
  if (successor_wrote_first) {
    EXPECT_EQ(paused->verdict, fence_verdict::refused) << "the stale write was accepted";
  }
}

// A stopped process runs no callback, so lost_token cannot fire before a successor's grant while
// the holder is stopped. What it can demand: the holder knows by the end of its write (held()
// false) that the lock went to another meanwhile. How late lost_token fired is printed.
void knows_by_the_end_of_its_write(const scenario_run& r) {
  for (const auto& s : r.sections) {
    if (!s.granted || !s.write_end) continue;
    std::optional<instant> successor;
    std::uint32_t successor_client = 0;
    for (const auto& o : r.sections)
      if (o.client != s.client && o.granted && *o.granted > *s.granted && *o.granted < *s.write_end &&
          (!successor || *o.granted < *successor)) {
        successor = o.granted;
        successor_client = o.client;
      }
    if (!successor) continue;
    std::cout << "client " << s.client << " (attempt " << s.attempt << "): client " << successor_client
              << " was granted before its write ended; lost_token "
              << (s.lost
                      ? (*s.lost <= *successor ? "fired " + seconds(*successor - *s.lost) + " before that grant"
                                               : "fired " + seconds(*s.lost - *successor) + " after that grant (late)")
                      : std::string("had not fired by the end of the section"))
              << "; held() at the end of its write: " << (s.held_at_end ? "true" : "false") << "\n";
    EXPECT_FALSE(s.held_at_end) << "client " << s.client << " ended its write believing it held the lock, "
                                << seconds(*s.write_end - *successor) << " after client " << successor_client
                                << " was granted it";
  }
}

// The paused client's section that spans the pause: its longest from grant to the end of its write
// (2.5 ttls; every other section lasts one write).
std::optional<section_id> paused_section(const scenario_run& r) {
  std::optional<section_id> paused;
  shared_clock::duration longest{-1};
  for (const auto& s : r.sections)
    if (r.result.victim && s.client == *r.result.victim && s.granted && s.wrote() &&
        s.write_finish() - *s.granted > longest) {
      longest = s.write_finish() - *s.granted;
      paused = section_id{s.client, s.attempt};
    }
  return paused;
}

// Overlaps in which the paused section takes no part: two holders at once with no pause between them.
std::vector<overlap> overlaps_without(const scenario_run& r, section_id paused) {
  std::vector<overlap> found;
  for (const auto& o : r.result.check.overlaps)
    if (!(o.older == paused) && !(o.newer == paused)) found.push_back(o);
  return found;
}

void only_the_paused_holder_overlaps(const scenario_run& r) {
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  const auto paused = paused_section(r);
  ASSERT_TRUE(paused) << "the paused client " << *r.result.victim << " has no section that wrote";
  for (const auto& o : overlaps_without(r, *paused))
    ADD_FAILURE() << "client " << o.older.client << " (attempt " << o.older.attempt << ") and client " << o.newer.client
                  << " (attempt " << o.newer.attempt << ") wrote at once, neither of them the paused section "
                  << paused->client << "/" << paused->attempt << ": a release freed a successor's lock";
}

// The plain-DEL release of the broken recipes: the paused holder, resumed, deletes the lock its successor
// holds, and another acquire (its own next one, or a third client's) gets in while the successor
// still writes.
void the_paused_holder_deletes_its_successors_lock(const scenario_run& r) {
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  const auto paused = paused_section(r);
  ASSERT_TRUE(paused) << "the paused client " << *r.result.victim << " has no section that wrote";
  const auto others = overlaps_without(r, *paused);
  std::cout << others.size() << " overlaps without the paused section " << paused->client << "/" << paused->attempt
            << "\n";
  EXPECT_GE(others.size(), 1u) << "no two holders wrote at once apart from the paused one: its release did not free "
                                  "a successor's lock";
}

void granted_again_after_the_restart(const scenario_run& r) {
  ASSERT_TRUE(r.result.server_down_for) << "the server was not restarted: " << r.result.fault_not_injected;
  EXPECT_TRUE(r.result.recovered_after) << "no grant after the server started again";
}

void no_unnotified_overlap(const scenario_run& r) {
  ASSERT_TRUE(r.result.server_down_for) << "the server was not restarted: " << r.result.fault_not_injected;
  for (const auto& o : r.result.check.overlaps) {
    const section* older = find_section(r.sections, o.older);
    const section* newer = find_section(r.sections, o.newer);
    if (older == nullptr || newer == nullptr || !newer->granted) continue;
    std::cout << "overlap: client " << o.older.client << " and client " << o.newer.client << "; the older's lost_token "
              << (older->lost ? (*older->lost <= *newer->granted
                                     ? "fired " + seconds(*newer->granted - *older->lost) + " before"
                                     : "fired " + seconds(*older->lost - *newer->granted) + " after")
                              : std::string("never fired before"))
              << " the newer grant\n";
  }
  EXPECT_EQ(r.result.check.unnotified_losses, 0u) << "a holder the restarted server forgot was not told before its "
                                                     "successor's grant";
}

// Without a restart guard, a lock freed with its holder's session (forupdate, advisory, getlock) goes
// to a waiter the moment the server ends that session, and its holder learns it at its session
// monitor's next look (README: within ~100 ms); a table scheme's row outlives the restart and its
// holder is told when its validity runs out. Either way: told, and soon; how late is printed.
constexpr auto told_within = 1s;

void told_soon_after_its_successors_grant(const scenario_run& r) {
  ASSERT_TRUE(r.result.server_down_for) << "the server was not restarted: " << r.result.fault_not_injected;
  for (const auto& o : r.result.check.overlaps) {
    const section* older = find_section(r.sections, o.older);
    const section* newer = find_section(r.sections, o.newer);
    if (older == nullptr || newer == nullptr || !newer->granted) continue;
    if (!older->lost) {
      EXPECT_FALSE(older->held_at_end) << "client " << o.older.client
                                       << " was never told, and ended its write believing "
                                       << "it held the lock client " << o.newer.client << " had been granted";
      std::cout << "overlap: client " << o.older.client << " and client " << o.newer.client
                << "; the older's lost_token had not fired by the end of its write (held() at the end: "
                << (older->held_at_end ? "true" : "false") << ")\n";
      continue;
    }
    const auto late = *older->lost - *newer->granted;
    std::cout << "overlap: client " << o.older.client << " and client " << o.newer.client
              << "; the older's lost_token fired "
              << (late <= 0ns ? seconds(-late) + " before" : seconds(late) + " after") << " the newer grant\n";
    EXPECT_LE(late, told_within) << "client " << o.older.client << " was told " << seconds(late) << " after client "
                                 << o.newer.client << " was granted its lock";
  }
}

void never_granted_again(const scenario_run& r) {
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  EXPECT_EQ(r.result.victim_caught, "between its acquire's two commands");
  EXPECT_FALSE(r.result.recovered_after) << "granted again " << seconds(r.result.recovered_after.value_or(0ns))
                                         << " after the holder died between its two commands";
  ASSERT_TRUE(r.result.watched_after_fault);
  EXPECT_GE(*r.result.watched_after_fault, 3 * r.settings.ttl) << "the run did not watch long enough to say 'never'";
}

void killed_at_its_grant_recovers_within_ttl(const scenario_run& r) {
  ASSERT_TRUE(r.result.victim) << "the fault was not injected: " << r.result.fault_not_injected;
  EXPECT_EQ(r.result.victim_caught, "at its grant");
  recovered_within_ttl(r);
}

}  // namespace

const std::vector<scenario_property>& scenario_properties() {
  static const std::vector<scenario_property> table = {
      {fault::healthy,
       "a safe lock never lets two clients write at once, and nothing fails (a process-scope lock's "
       "clients are threads of one process)",
       excludes_its_clients, healthy_exclusion},
      {fault::healthy, "fencing: every write carries a token, larger than every earlier one", fences_its_clients,
       tokens_increase_in_write_order},
      {fault::holder_kill, "expiring: a killed holder's lock is granted again within its ttl (+ margin)", expiring,
       recovered_within_ttl},
      {fault::holder_kill, "a killed holder never overlaps anyone", excludes, no_overlap_stale_write_or_error},
      {fault::holder_pause, "fencing: the fenced resource refuses every stale write", fencing_across_processes,
       fence_refuses_every_stale_write},
      {fault::holder_pause, "lost_notification: a holder knows by the end of its write that its lock went to another",
       notifies, knows_by_the_end_of_its_write},
      {fault::holder_pause, "only the paused holder overlaps: no release frees a successor's lock", excludes,
       only_the_paused_holder_overlaps},
      {fault::holder_pause, "UNSAFE plain delete: the resumed holder deletes its successor's lock",
       deletes_its_successors_lock, the_paused_holder_deletes_its_successors_lock},
      {fault::pause_before_write, "fencing: the resumed holder's stale write is refused", fencing_across_processes,
       paused_writer_refused_after_a_successor},
      {fault::pause_before_write,
       "lost_notification: a holder knows by the end of its write that its lock went to another", notifies,
       knows_by_the_end_of_its_write},
      {fault::pause_before_write, "only the paused holder overlaps: no release frees a successor's lock", excludes,
       only_the_paused_holder_overlaps},
      {fault::server_restart, "the lock is granted again after the server's restart", safe_with_one_server,
       granted_again_after_the_restart},
      {fault::server_restart, "a restart guard: no overlap whose older holder was not told before the newer grant",
       guards_restarts, no_unnotified_overlap},
      {fault::server_restart,
       "lost_notification: a holder the restart cost its lock is told at most 1 s after its "
       "successor's grant",
       notifies_with_one_server, told_soon_after_its_successors_grant},
      {fault::kill_mid_acquire,
       "UNSAFE two-command acquire: a client killed between the commands leaves the lock forever", two_command_acquire,
       never_granted_again},
      {fault::kill_mid_acquire, "the safe counterpart: a client killed at its grant leaves a lock that frees itself",
       counterpart_of_a_two_command_acquire, killed_at_its_grant_recovers_within_ttl},
  };
  return table;
}

}  // namespace dlock::compare::testing
