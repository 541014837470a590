#include "dlock_compare/kill_mid_acquire.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

#include "dlock_compare/cell_setup.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/section.hpp"
#include "fault_steps.hpp"

namespace dlock::compare {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr auto pause_parameter = "unsafe_pause_between";
// Waiters retry at least this often, so a free lock is taken within it (plus one round trip).
constexpr auto poll_parameter = "poll=5ms..50ms";
// Client 1, alone, inside its acquire this long without a grant: it is between its two commands
// (its first command returns in a round trip; the pause is longer than the run).
constexpr milliseconds free_but_not_granted = 300ms;
// After the others are resumed, before the kill: long enough for them to be waiting on the lock.
constexpr milliseconds others_start_waiting = 200ms;

// Where the kill is looked for: the first part of the run, so that 3 ttls remain after it.
milliseconds search_window(const scenario_settings& s) { return 2 * s.ttl + 500ms; }

// Client 1's latest section: nullptr before its first event.
const section* latest_of_client_1(const std::vector<section>& sections) {
  const section* latest = nullptr;
  for (const auto& s : sections)
    if (s.client == 1) latest = &s;  // ordered by attempt
  return latest;
}

// Alone (the others held back), client 1 is at its place: granted, where the acquire is one
// command; inside its acquire for a while without a grant, where it is two (nobody else can hold
// the lock, so the first command won and the pause holds it before the second).
bool at_its_place(const std::vector<section>& sections, bool two_commands) {
  const section* s = latest_of_client_1(sections);
  if (s == nullptr) return false;
  if (!two_commands) return s->granted && !s->release_done;
  return s->acquire_started && !s->granted && !s->gave_up &&
         shared_clock::now() - *s->acquire_started >= free_but_not_granted;
}

// Clients 2..N stopped (SIGSTOP) before the run starts, so that client 1 is alone to win the first
// command; resumed by resume() or, whatever happens, when the scope ends.
class others_held_back {
 public:
  explicit others_held_back(const worker_fleet& fleet) : fleet_(fleet) {
    for (std::uint32_t client = 2; client <= fleet_.size(); ++client) ::kill(fleet_.pid(client), SIGSTOP);
  }
  ~others_held_back() { resume(); }
  others_held_back(const others_held_back&) = delete;
  others_held_back& operator=(const others_held_back&) = delete;
  void resume() {
    if (resumed_) return;
    resumed_ = true;
    for (std::uint32_t client = 2; client <= fleet_.size(); ++client) ::kill(fleet_.pid(client), SIGCONT);
  }

 private:
  const worker_fleet& fleet_;
  bool resumed_ = false;
};

}  // namespace

bool acquire_has_two_commands(const backend_info& info) {
  return std::ranges::find(info.parameters, pause_parameter) != info.parameters.end();
}

milliseconds kill_mid_acquire_run_length(const scenario_settings& s) {
  return std::max(s.duration, search_window(s) + 3 * s.ttl);
}

void prepare_kill_mid_acquire(fleet_plan& plan, const scenario_settings& s) {
  plan.uri = with_parameter(plan.uri, poll_parameter);
  // Longer than the run: once client 1 wins the first command, nothing but the kill ends its pause.
  if (s.acquire_has_two_commands) {
    if (plan.launch.empty()) plan.launch.resize(1);  // client 1 alone opens the pausing URI
    plan.launch.front().uri = with_parameter(
        plan.uri, std::string(pause_parameter) + "=" + std::to_string(plan.duration.count() + 60'000) + "ms");
  }
}

void run_kill_mid_acquire(worker_fleet& fleet, const fleet_plan& plan, const scenario_settings& s, scenario_result& r) {
  others_held_back others(fleet);
  sleep_until(fleet.start_at());
  const auto search_until = fleet.start_at() + search_window(s);
  bool found = false;
  while (!found && shared_clock::now() < search_until) {  // bounded by the window
    std::this_thread::sleep_for(10ms);
    found = at_its_place(assemble_sections(read_history(plan.history)), s.acquire_has_two_commands);
  }
  others.resume();
  if (!found) {
    r.fault_not_injected = s.acquire_has_two_commands ? "client 1 never won the first of its two commands"
                                                      : "client 1 was never granted the lock";
    return;
  }
  std::this_thread::sleep_for(others_start_waiting);  // the others are waiting for the lock when it dies
  const auto killed_at = shared_clock::now();
  ::kill(fleet.pid(1), SIGKILL);
  r.victim = 1;
  r.victim_caught = s.acquire_has_two_commands ? "between its acquire's two commands" : "at its grant";
  r.worker_exit_codes = fleet.wait(fault_steps::wait_deadline(fleet, plan));
  r.recovered_after = time_to_recover(assemble_sections(read_history(plan.history)), killed_at);
  r.watched_after_fault = fleet.stop_at() - killed_at;  // grants are possible until the workers stop
}

std::string kill_mid_acquire_observation(const scenario_result& r) {
  std::string text = "killed " + r.victim_caught + ": ";
  if (r.recovered_after) return text + "recovered in " + fault_steps::seconds(*r.recovered_after);
  return text + "never granted again" +
         (r.watched_after_fault ? " (" + fault_steps::seconds(*r.watched_after_fault) + " watched)" : std::string());
}

}  // namespace dlock::compare
