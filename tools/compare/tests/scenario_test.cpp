// The scenarios of dlock compare as tests: for each fault and each backend built in, the fault is
// run once on the backend's server (ttl 1 s, 3 client processes) and every property of
// scenario_properties.hpp the backend's declaration claims is checked on that run. A (fault,
// backend) that claims nothing is not a test. Names: compare/scenario/Scenario.Properties/
// <fault>_on_<scheme> ('-' and '+' become '_').
//
// The servers come from compose/native/dlock-servers' variables, as for dlock compare
// (servers.hpp); a backend whose variable is unset FAILS, unless DLOCK_TEST_EXCLUDE names its
// scheme or its family (the part before '+'), as for the conformance suite. server-restart needs
// DLOCK_SERVERS (the launcher) and restarts the server: those tests run alone (RUN_SERIAL).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_compare/cell_setup.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_test/support.hpp"
#include "scenario_properties.hpp"
#include "temp_dir.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

struct scenario_case {
  fault scenario;
  std::string scheme;
};

// Every (fault, built-in scheme) that at least one property claims. Fixed at build time (the
// PRE_TEST list must not depend on the environment).
std::vector<scenario_case> claimed_cases() {
  std::vector<scenario_case> cases;
  const auto infos = default_registry().list();
  for (const auto f : every_fault())
    for (const auto& info : infos)
      if (std::ranges::any_of(scenario_properties(),
                              [&](const scenario_property& p) { return p.scenario == f && p.claimed_by(info); }))
        cases.push_back({f, info.scheme});
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<scenario_case>& info) {
  std::string name = std::string(to_string(info.param.scenario)) + "_on_" + info.param.scheme;
  std::ranges::replace_if(
      name, [](char c) { return c == '-' || c == '+'; }, '_');
  return name;
}

bool excluded(const std::string& scheme) {
  const auto names = dlock::testing::excluded_names_from_environment();
  const auto family = scheme.substr(0, scheme.find('+'));
  return std::ranges::any_of(names, [&](const std::string& n) { return n == scheme || n == family; });
}

// The run's sections, one line each, in ms from the first event: printed when a property failed,
// so the failure can be read without running it again.
void print_timeline(const std::vector<section>& sections) {
  std::optional<instant> origin;
  for (const auto& s : sections)
    if (s.acquire_started && (!origin || *s.acquire_started < *origin)) origin = s.acquire_started;
  const auto at = [&](const std::optional<instant>& t) {
    return t && origin ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*t - *origin).count())
                       : std::string("-");
  };
  static constexpr const char* outcome[] = {"-", "released", "not_owner", "failed"};
  std::cout << "timeline (ms): client/attempt token: granted write_begin..write_end (held at begin/end) lost release\n";
  for (const auto& s : sections)
    if (s.granted)
      std::cout << "  " << s.client << "/" << s.attempt << " " << (s.token ? std::to_string(*s.token) : "-") << ": "
                << at(s.granted) << " " << at(s.write_begin) << ".." << at(s.write_end) << " (" << s.held_at_begin
                << "/" << s.held_at_end << ") " << at(s.lost) << " " << outcome[static_cast<int>(s.release)] << " "
                << at(s.release_done) << "\n";
}

class Scenario : public ::testing::TestWithParam<scenario_case> {};

TEST_P(Scenario, Properties) {
  const auto& [f, scheme] = GetParam();
  if (excluded(scheme)) GTEST_SKIP() << scheme << " excluded (DLOCK_TEST_EXCLUDE)";
  const auto infos = default_registry().list();
  const auto& info = *std::ranges::find(infos, scheme, &backend_info::scheme);
  temp_dir dir;

  scenario_settings s;
  s.worker_executable = DLOCK_COMPARE_WORKER;
  s.clients = 3;
  s.duration = 1s;  // healthy: dozens of handoffs; the faults run as long as they need
  s.ttl = 1s;
  s.name = dlock::testing::unique_name("compare-scenario");
  s.work_dir = dir.path() / "run";
  std::filesystem::create_directory(s.work_dir);
  // Exactly the URI and settings `dlock compare` runs this cell with (cell_setup.hpp).
  const auto uri = cell_uri(info, f, s.ttl, dir.path());
  ASSERT_TRUE(uri.uri) << scheme << ": " << uri.not_run_because
                       << ": start the servers with compose/native/dlock-servers up, or exclude it with "
                          "DLOCK_TEST_EXCLUDE="
                       << scheme;
  s.uri = *uri.uri;
  prepare_settings(s, info, f);

  const auto result = run_scenario(f, s);
  const auto events = read_history(s.work_dir / "history");
  const auto sections = assemble_sections(events);
  std::cout << to_string(f) << " on " << scheme << ": " << observation(f, result)
            << "\ncheck: " << to_json(result.check, 5) << "\n";
  const scenario_run run{info, f, s, result, sections};
  for (const auto& p : scenario_properties()) {
    if (p.scenario != f || !p.claimed_by(info)) continue;
    SCOPED_TRACE(std::string(p.claim));
    std::cout << "checking: " << p.claim << "\n";
    p.check(run);
  }
  if (HasFailure()) print_timeline(sections);
}

INSTANTIATE_TEST_SUITE_P(, Scenario, ::testing::ValuesIn(claimed_cases()), case_name);

}  // namespace
}  // namespace dlock::compare::testing
