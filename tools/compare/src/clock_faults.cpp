#include "dlock_compare/clock_faults.hpp"

#include <glob.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "dlock_compare/history.hpp"
#include "fault_steps.hpp"

namespace dlock::compare {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

// libfaketime's setting for one client, read at every clock call (FAKETIME_NO_CACHE) so that a
// write here steps the running process' clock.
void write_setting(const std::filesystem::path& file, const std::string& setting) {
  std::ofstream out(file, std::ios::trunc);
  out << setting << '\n';
  if (!out.flush()) throw std::runtime_error("cannot write libfaketime's setting to " + file.string());
}

std::filesystem::path setting_file(const scenario_settings& s, std::uint32_t client) {
  return s.work_dir / ("faketime-client-" + std::to_string(client));
}

std::string rate_text() {
  char buf[16];
  std::snprintf(buf, sizeof buf, "x%.2f", clock_slow_rate);  // the C locale's '.' (libfaketime parses with it)
  return buf;
}

}  // namespace

std::string libfaketime_path() {
  glob_t found{};
  std::string path;
  if (::glob("/usr/lib/*/faketime/libfaketimeMT.so.1", 0, nullptr, &found) == 0 && found.gl_pathc > 0)
    path = found.gl_pathv[0];
  ::globfree(&found);
  return path;
}

namespace {
// libfaketime's library; empty, and r says the fault was not injected, when it is not installed.
std::string libfaketime_or_why_not(scenario_result& r) {
  auto lib = libfaketime_path();
  if (lib.empty()) r.fault_not_injected = "libfaketime is not installed (Debian package faketime)";
  return lib;
}
}  // namespace

milliseconds clock_fault_run_length(fault f, const scenario_settings& s) {
  if (f == fault::clock_step) return std::max(s.duration, 3 * s.ttl + 1s);
  return std::max(s.duration, 8 * s.ttl);  // a few holds of two real ttls each
}

scenario_result run_clock_step(const scenario_settings& s) {
  scenario_result r;
  const auto lib = libfaketime_or_why_not(r);
  if (lib.empty()) return r;
  auto plan = fault_steps::plan(s, 200ms, clock_fault_run_length(fault::clock_step, s));
  plan.start_delay = 1s;  // a worker behind `ip netns exec` or libfaketime starts a little slower
  for (std::uint32_t c = 1; c <= s.clients; ++c) {
    write_setting(setting_file(s, c), "+0");
    plan.launch.push_back({{},
                           {"LD_PRELOAD=" + lib, "FAKETIME_TIMESTAMP_FILE=" + setting_file(s, c).string(),
                            "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"},
                           {}});
  }
  instant stepped_at{};
  {
    worker_fleet fleet(plan);
    r.victim = fault_steps::stop_a_holder_inside_its_write(fleet, plan);
    if (!r.victim) {
      r.fault_not_injected = "no holder was caught inside its write";
    } else {
      for (std::uint32_t c = 1; c <= s.clients; ++c)
        if (c != *r.victim) write_setting(setting_file(s, c), "+" + std::to_string(clock_step_by.count()));
      stepped_at = shared_clock::now();
      ::kill(fleet.pid(*r.victim), SIGCONT);
    }
    fault_steps::finish(fleet, plan, r);
  }
  if (!r.victim) return r;
  const auto sections = assemble_sections(read_history(plan.history));
  const auto next = fault_steps::next_grant_to_another(sections, *r.victim, stepped_at);
  if (next) r.recovered_after = *next - stepped_at;
  r.fault_notes.push_back("others' wall clocks +" + std::to_string(clock_step_by.count()) + "s while client " +
                          std::to_string(*r.victim) + " held");
  if (const auto victim = fault_steps::section_at(sections, *r.victim, stepped_at);
      victim && next && *next < victim->write_finish())
    r.fault_notes.push_back("taken over " + fault_steps::seconds(*next - stepped_at) + " after the step, " +
                            fault_steps::notified_text(*victim, next));
  return r;
}

scenario_result run_clock_slow(const scenario_settings& s) {
  scenario_result r;
  const auto lib = libfaketime_or_why_not(r);
  if (lib.empty()) return r;
  // Client 1 runs slow and starts first, so it is the first holder (the others, at real speed,
  // poll faster than it could win the lock back); its write is half a ttl of its own clock.
  const milliseconds slow_work = s.ttl / 2;
  auto plan = fault_steps::plan(s, 200ms, clock_fault_run_length(fault::clock_slow, s));
  plan.start_delay = 1s;  // a worker behind `ip netns exec` or libfaketime starts a little slower
  plan.work[0] = slow_work;
  plan.launch.push_back({{}, {"LD_PRELOAD=" + lib, "FAKETIME=+0 " + rate_text()}, {}});
  for (std::uint32_t c = 2; c <= s.clients; ++c) plan.launch.push_back({{}, {}, {}, 300ms});
  r.victim = 1;
  {
    worker_fleet fleet(plan);
    fault_steps::finish(fleet, plan, r);
  }
  const auto sections = assemble_sections(read_history(plan.history));
  std::optional<section> first;
  for (const auto& sec : sections)
    if (sec.client == 1 && sec.granted && sec.write_end) {
      first = sec;
      break;
    }
  std::string note = "client 1's clocks " + rate_text() + " (monotonic too)";
  if (!first) {
    r.fault_not_injected = "the slow client never finished a write";
    r.fault_notes.push_back(note);
    return r;
  }
  note += ": its " + std::to_string(slow_work.count()) + "ms write took " +
          fault_steps::seconds(*first->write_end - *first->write_begin) + " real, held() " +
          (first->held_at_end ? "still true" : "false") + " at its end";
  r.fault_notes.push_back(note);
  const auto next = fault_steps::next_grant_to_another(sections, 1, *first->granted);
  if (next) {
    r.recovered_after = *next - *first->granted;
    r.fault_notes.push_back("next grant " + fault_steps::seconds(*next - *first->granted) + " after its grant");
  }
  if (next && *next < first->write_finish()) r.fault_notes.push_back(fault_steps::notified_text(*first, next));
  r.fault_notes.push_back(fault_steps::release_text(*first));
  return r;
}

}  // namespace dlock::compare
