#include "dlock_compare/speed_report.hpp"

#include <algorithm>
#include <cstdio>

#include "dlock_compare/text_table.hpp"

namespace dlock::compare {

namespace {

std::string number(double v, const char* format) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string three_digits(double v) { return number(v, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f"); }

}  // namespace

text_rows speed_rows(const speed_table& t) {
  const auto n = std::to_string(speed_clients);
  text_rows rows = {{"backend", "cycles/s 1 client", "cycles/s " + n + " clients", "handoffs", "handoff p50",
                     "handoff p99", "cycle p50 (1 client)", "note"}};
  for (const auto& r : t.rows) {
    std::vector<std::string> row = {r.backend};
    if (!r.measured) {
      row.insert(row.end(), {"-", "-", "-", "-", "-", "-", "not run: " + r.not_run_because});
    } else {
      const auto& s = *r.measured;
      const auto rate = [](const std::optional<speed_measurement>& m) {
        return m ? rate_text(m->cycles_per_second()) : "-";
      };
      const auto handoff = [&](double p) {
        return s.contended && s.contended->handoffs.count() ? latency_text(s.contended->handoffs.percentile(p)) : "-";
      };
      row.push_back(rate(s.one_client));
      row.push_back(rate(s.many_clients));
      row.push_back(s.contended ? std::to_string(s.contended->handoffs.count()) : "-");
      row.push_back(handoff(0.5));
      row.push_back(handoff(0.99));
      row.push_back(s.one_client && s.one_client->cycles.count() ? latency_text(s.one_client->cycles.percentile(0.5))
                                                                 : "-");
      std::string note = r.unsafe ? "UNSAFE (baseline only)" : "";
      if (!r.errors.empty()) note += (note.empty() ? "" : "; ") + r.errors;
      row.push_back(note);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

std::string speed_legend(const speed_table& t) {
  const auto n = std::to_string(speed_clients);
  return "Speed, measured in this run, " + std::to_string(t.duration_per_point.count()) +
         "ms per point:\n"
         "  cycles/s      acquire+release cycles per second, by 1 client and by " +
         n +
         " clients, each client a\n"
         "                thread of this process with its own backend object (connection) and a name of its own\n"
         "  handoff       " +
         n +
         " clients on one name: from a release to the grant of a client already waiting\n"
         "                (handoffs: how many were seen; a polling lock's releaser often takes it again, so few)\n"
         "  cycle p50     one uncontended acquire+release\n"
         "  UNSAFE        an unsafe variant, measured as the baseline such recipes claim; never use it\n" +
         wrapped_words("CPU placement: " + t.cpu_placement + ".", 160, 2);
}

std::string measurement_json(const std::optional<speed_measurement>& m) {
  if (!m) return "null";
  return "{\"clients\": " + std::to_string(m->clients) + ", \"names\": " + std::to_string(m->names) +
         ", \"seconds\": " + number(m->seconds, "%.3f") + ", \"cycles\": " + std::to_string(m->cycles.count()) +
         ", \"cycles_per_s\": " + number(m->cycles_per_second(), "%.1f") +
         ", \"cycle_p50_us\": " + number(m->cycles.percentile_us(0.5), "%.2f") +
         ", \"cycle_p99_us\": " + number(m->cycles.percentile_us(0.99), "%.2f") +
         ", \"handoffs\": " + std::to_string(m->handoffs.count()) +
         ", \"handoff_p50_us\": " + number(m->handoffs.percentile_us(0.5), "%.2f") +
         ", \"handoff_p99_us\": " + number(m->handoffs.percentile_us(0.99), "%.2f") +
         ", \"errors\": " + std::to_string(m->errors) + "}";
}

}  // namespace

std::string latency_text(std::chrono::nanoseconds d) {
  const auto ns = static_cast<double>(d.count());
  if (ns < 1e3) return number(ns, "%.0fns");
  if (ns < 1e6) return three_digits(ns / 1e3) + "us";
  if (ns < 1e9) return three_digits(ns / 1e6) + "ms";
  return three_digits(ns / 1e9) + "s";
}

std::string rate_text(double per_second) {
  return (per_second >= 100 ? number(per_second, "%.0f") : three_digits(per_second)) + "/s";
}

std::string speed_text(const speed_table& t, std::size_t columns) {
  if (t.rows.empty()) return {};
  // A note too long for the room the other columns leave (an error, a reason it did not run) is
  // written in full under the table, so that every line fits `columns`.
  auto rows = speed_rows(t);
  std::size_t before_note = 0;
  for (std::size_t i = 0; i + 1 < rows.front().size(); ++i) {
    std::size_t width = 0;
    for (const auto& row : rows) width = std::max(width, row[i].size());
    before_note += width + 2;
  }
  const auto room = columns > before_note ? columns - before_note : 0;
  std::string notes;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    auto& note = rows[r].back();
    if (note.size() <= room) continue;
    notes += wrapped_words(rows[r].front() + ": " + note, columns, 2);
    note = "(below)";
  }
  return "\n" + aligned_columns(rows) + notes + "\n" + speed_legend(t);
}

std::string speed_markdown(const speed_table& t) {
  if (t.rows.empty()) return {};
  return "\n" + markdown_table(speed_rows(t)) + "\n```\n" + speed_legend(t) + "```\n";
}

std::string speed_json(const speed_table& t) {
  if (t.rows.empty()) return "null";
  std::string out = "{\"duration_per_point_ms\": " + std::to_string(t.duration_per_point.count()) +
                    ", \"clients\": " + std::to_string(speed_clients) +
                    ", \"cpu_placement\": " + json_string(t.cpu_placement) + ",\n  \"rows\": [";
  bool first = true;
  for (const auto& r : t.rows) {
    out += first ? "\n   " : ",\n   ";
    first = false;
    out += "{\"backend\": " + json_string(r.backend) + ", \"unsafe\": " + (r.unsafe ? "true" : "false") +
           ", \"ran\": " + (r.measured ? "true" : "false");
    if (!r.measured) {
      out += ", \"not_run_because\": " + json_string(r.not_run_because) + "}";
      continue;
    }
    out += ", \"uri\": " + json_string(r.uri) + ", \"errors\": " + json_string(r.errors) +
           ",\n    \"one_client\": " + measurement_json(r.measured->one_client) +
           ",\n    \"many_clients\": " + measurement_json(r.measured->many_clients) +
           ",\n    \"contended\": " + measurement_json(r.measured->contended) + "}";
  }
  return out + "\n  ]}";
}

}  // namespace dlock::compare
