#pragma once
// The properties the scenario tests assert, one table: each names the fault it is judged in, which
// backends claim it (from their declaration: capabilities, scope, unsafe_because, parameters), and
// the check on that run. A fault of its own adds its rows here; the test runs each (fault, backend)
// that at least one row claims, once, and checks every row that claims it.
#include <chrono>
#include <string_view>
#include <vector>

#include "dlock/registry.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/section.hpp"

namespace dlock::compare::testing {

// One run of a scenario, as a property judges it.
struct scenario_run {
  const backend_info& info;
  fault scenario;
  const scenario_settings& settings;
  const scenario_result& result;
  const std::vector<section>& sections;  // the run's history
};

struct scenario_property {
  fault scenario;
  std::string_view claim;                   // what is asserted, in words (printed with each failure)
  bool (*claimed_by)(const backend_info&);  // from the backend's declaration
  void (*check)(const scenario_run&);       // gtest EXPECTs
};

const std::vector<scenario_property>& scenario_properties();

// The margin a property adds to the ttl where it bounds a recovery: a loaded 2-core machine
// delays a waiter's poll, a server's expiry sweep and a process' start; never a speed claim.
inline constexpr std::chrono::milliseconds recovery_margin{3000};

}  // namespace dlock::compare::testing
