#pragma once
// The speed phase of `dlock compare`: after the fault matrix, each backend row measured with
// client threads (tools/compare's speed module), one backend object and connection per client.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/speed_report.hpp"

namespace dlock::cli {

struct speed_target {
  std::string backend;
  bool unsafe = false;
  std::optional<std::string> uri;  // the healthy run's URI; nullopt: not measured, and why below
  std::string not_run_because;
};

// Measures every target that has a URI (`announce` is called before each, for the progress
// line); errors are scrubbed of secrets and reported in the row, never thrown.
compare::speed_table measure_speeds(const std::vector<speed_target>& targets, std::chrono::milliseconds per_point,
                                    const std::string& name_prefix,
                                    const std::function<void(const speed_target&)>& announce);

}  // namespace dlock::cli
