#include "compare_speed.hpp"

#include "common.hpp"
#include "dlock/dlock.hpp"

namespace dlock::cli {

namespace {

// "1 client: <error>; 8 on one name: <error>": which point failed, and how, secrets scrubbed.
std::string errors_of(const compare::backend_speed& s) {
  std::string out;
  const auto add = [&](const std::optional<compare::speed_measurement>& m, const std::string& point) {
    if (!m || m->errors == 0) return;
    out += (out.empty() ? "" : "; ") + point + ": " + std::to_string(m->errors) + " client(s) stopped by an error (" +
           scrub_secrets(m->first_error) + ")";
  };
  const auto n = std::to_string(compare::speed_clients);
  add(s.one_client, "1 client");
  add(s.many_clients, n + " clients");
  add(s.contended, n + " on one name");
  return out;
}

}  // namespace

compare::speed_table measure_speeds(const std::vector<speed_target>& targets, std::chrono::milliseconds per_point,
                                    const std::string& name_prefix,
                                    const std::function<void(const speed_target&)>& announce) {
  compare::speed_table table;
  table.duration_per_point = per_point;
  table.cpu_placement = compare::cpu_placement();
  for (const auto& t : targets) {
    auto& row = table.rows.emplace_back();
    row.backend = t.backend;
    row.unsafe = t.unsafe;
    if (!t.uri) {
      row.not_run_because = t.not_run_because;
    } else {
      announce(t);
      row.uri = redact_for_message(*t.uri);
      row.measured = compare::measure_backend_speed(*t.uri, name_prefix + t.backend + "/", per_point);
      row.errors = errors_of(*row.measured);
    }
  }
  return table;
}

}  // namespace dlock::cli
