#include "dlock_compare/html_report.hpp"

#include <algorithm>
#include <cstdio>

#include "dlock_compare/speed_report.hpp"
#include "dlock_compare/svg_chart.hpp"

namespace dlock::compare {

namespace {

using std::chrono::milliseconds;

constexpr const char* style = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:6px 8px;vertical-align:top}
th{background:#f3f3f3;text-align:left}
table.settings td:first-child{color:#555}
td.cell{max-width:220px;font-size:13px}
.good{background:#c8ebc8}.warn{background:#ffe0a3}.bad{background:#f6b3b3}.none{background:#e4e4e4;color:#666}
tr.unsafe th{background:repeating-linear-gradient(45deg,#fbe3e3,#fbe3e3 6px,#fff 6px,#fff 12px)}
.badge{display:inline-block;margin-left:6px;padding:0 5px;border-radius:3px;background:#b00;color:#fff;font-size:11px}
.legend span.swatch{display:inline-block;width:14px;height:14px;border:1px solid #999;vertical-align:middle;margin:0 4px 0 14px}
svg.chart{display:block;margin:8px 0 16px;font-size:11px}
svg .grid{stroke:#ddd;stroke-width:1}svg .chart-title{font-size:13px;font-weight:600}
svg .small{font-size:10px;fill:#333}svg .unsafe-label{fill:#b00}
td.num{text-align:right;font-variant-numeric:tabular-nums}
)";

const char* class_of(cell_verdict v) {
  switch (v) {
    case cell_verdict::good: return "good";
    case cell_verdict::warn: return "warn";
    case cell_verdict::bad: return "bad";
    case cell_verdict::none: return "none";
  }
  return "none";
}

std::string ms(shared_clock::duration d) {
  return latency_text(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
}

// The tooltip: what the checker counted, beyond the cell's short text.
std::string details(const matrix_cell& cell) {
  if (!cell.result) return cell.text;
  const auto& r = *cell.result;
  const auto& c = r.check;
  std::string out = cell.text + "\nuri: " + cell.uri;
  if (!r.fault_not_injected.empty()) out += "\nfault not injected: " + r.fault_not_injected;
  if (r.victim) out += "\nvictim: client " + std::to_string(*r.victim);
  if (r.paused_for.count() > 0) out += "\npaused for: " + std::to_string(r.paused_for.count()) + "ms";
  if (r.server_down_for) out += "\nserver down for: " + ms(*r.server_down_for);
  if (r.recovered_after) out += "\nnext grant after the fault: " + ms(*r.recovered_after);
  out += "\nclients " + std::to_string(c.totals.clients) + ", acquires " + std::to_string(c.totals.acquires) +
         ", grants " + std::to_string(c.totals.grants) + ", writes " + std::to_string(c.totals.writes) +
         "\noverlaps " + std::to_string(c.overlap_count()) + " (unnotified " + std::to_string(c.unnotified_losses) + ")" +
         "\nstale writes: accepted by the naive resource " + std::to_string(c.stale_writes_accepted_by_naive) +
         ", refused by the fenced one " + std::to_string(c.stale_writes_refused_by_fenced) +
         "\nlost notifications " + std::to_string(c.totals.lost_notifications) + ", releases not owner " +
         std::to_string(c.totals.release_not_owner) + "\nacquire timeouts " + std::to_string(c.totals.acquire_timeouts) +
         ", acquire errors " + std::to_string(c.totals.acquire_errors) + ", release errors " +
         std::to_string(c.totals.release_errors) + "\nlongest unavailable " + ms(c.longest_unavailable) +
         ", longest wait for a grant " + ms(c.longest_wait_for_grant);
  return out;
}

bool is_unsafe(const matrix& m, const std::string& backend) {
  return std::ranges::find(m.unsafe_backends, backend) != m.unsafe_backends.end();
}

std::string row_header(const matrix& m, const std::string& backend) {
  return "<th>" + html_escaped(backend) + (is_unsafe(m, backend) ? "<span class=\"badge\">UNSAFE</span>" : "") + "</th>";
}

std::string settings(const matrix& m, const run_context& context) {
  const auto row = [](const std::string& key, const std::string& value) {
    return "<tr><td>" + html_escaped(key) + "</td><td>" + html_escaped(value) + "</td></tr>";
  };
  std::string out = "<table class=\"settings\">";
  out += row("command", context.command_line);
  out += row("date", context.date_utc);
  out += row("lock ttl", std::to_string(m.ttl.count()) + "ms");
  out += row("client processes per cell", std::to_string(m.clients));
  out += row("healthy run", std::to_string(m.duration.count()) + "ms");
  out += row("host CPUs online", std::to_string(context.host_cpus));
  if (!m.speed.rows.empty()) {
    out += row("speed", std::to_string(m.speed.duration_per_point.count()) + "ms per point, " +
                            std::to_string(speed_clients) + " client threads at most");
    out += row("CPU placement", m.speed.cpu_placement);
  }
  return out + "</table>";
}

std::string legend() {
  const auto swatch = [](const char* cls, const char* text) {
    return std::string("<span class=\"swatch ") + cls + "\"></span>" + text;
  };
  return "<p class=\"legend\">" + swatch("good", "ok: no overlap, no stale write, no error") +
         swatch("bad", "overlaps, unnotified losses, or stale writes the fence did not refuse") +
         swatch("warn", "stale writes refused only by the fence, no grant for over 2 ttls after the fault, errors, or "
                        "a fault not injected") +
         swatch("none", "not run (the cell says why)") +
         "<br>Hover over a cell for what the checker counted. Rows marked <span class=\"badge\">UNSAFE</span> are "
         "the well-known broken recipes, run to show their failures; never use them.</p>";
}

std::string grid(const matrix& m) {
  std::string out = "<table class=\"matrix\"><tr><th>backend</th>";
  for (const auto f : m.faults) out += "<th>" + html_escaped(std::string(to_string(f))) + "</th>";
  out += "</tr>";
  for (const auto& b : m.backends) {
    out += std::string("<tr") + (is_unsafe(m, b) ? " class=\"unsafe\"" : "") + ">" + row_header(m, b);
    for (const auto f : m.faults) {
      const auto* cell = m.find(b, f);
      const auto verdict = cell ? verdict_of(*cell, m.ttl) : cell_verdict::none;
      const std::string text = cell ? cell->text : "not run: not reached";
      out += std::string("<td class=\"cell ") + class_of(verdict) + "\" title=\"" +
             html_escaped(cell ? details(*cell) : text) + "\">" + html_escaped(text) + "</td>";
    }
    out += "</tr>";
  }
  return out + "</table>";
}

double rate_of(const std::optional<speed_measurement>& m) { return m ? m->cycles_per_second() : 0.0; }

std::string speed_section(const matrix& m) {
  if (m.speed.rows.empty()) return "<h2>Speed</h2><p>Not measured in this run (--no-speed).</p>";
  const auto n = std::to_string(speed_clients);
  std::vector<bar_group> bars;
  std::vector<cdf_series> cycles, handoffs;
  // The table's cells are the text table's; the first column becomes the flagged row header.
  const auto rows = speed_rows(m.speed);
  std::string table = "<table><tr>";
  for (const auto& heading : rows.front()) table += "<th>" + html_escaped(heading) + "</th>";
  table += "</tr>";
  for (std::size_t i = 0; i < m.speed.rows.size(); ++i) {
    const auto& r = m.speed.rows[i];
    table += std::string("<tr") + (r.unsafe ? " class=\"unsafe\"" : "") + ">" + row_header(m, r.backend);
    for (std::size_t column = 1; column < rows[i + 1].size(); ++column)
      table += "<td class=\"num\">" + html_escaped(rows[i + 1][column]) + "</td>";
    table += "</tr>";
    if (!r.measured) continue;
    const auto& s = *r.measured;
    bars.push_back({r.backend, r.unsafe, {rate_of(s.one_client), rate_of(s.many_clients)}});
    if (s.one_client) cycles.push_back({r.backend, r.unsafe, &s.one_client->cycles});
    if (s.contended) handoffs.push_back({r.backend, r.unsafe, &s.contended->handoffs});
  }
  table += "</table>";
  return "<h2>Speed</h2><p>Measured in the same run, " + std::to_string(m.speed.duration_per_point.count()) +
         "ms per point; each client a thread with its own backend object and connection. " +
         html_escaped(m.speed.cpu_placement) + ".</p>" +
         svg_bars("acquire+release cycles per second (log scale), each client on a name of its own",
                  {"1 client", n + " clients"}, bars) +
         table +
         svg_cdf("uncontended acquire+release latency, 1 client: cumulative distribution", cycles) +
         svg_cdf("handoff under contention (" + n + " clients, one name): release to the next waiting client's grant",
                 handoffs);
}

}  // namespace

cell_verdict verdict_of(const matrix_cell& cell, milliseconds ttl) {
  if (!cell.result) return cell_verdict::none;
  const auto& r = *cell.result;
  const auto& c = r.check;
  if (c.overlap_count() > 0 || c.unnotified_losses > 0 || c.stale_writes_accepted_by_naive > c.stale_writes_refused_by_fenced)
    return cell_verdict::bad;
  const bool struck = r.victim.has_value() || r.server_down_for.has_value();
  const bool long_unavailable =
      struck && cell.scenario != fault::healthy && (!r.recovered_after || *r.recovered_after > 2 * ttl);
  const bool errors = c.totals.acquire_errors + c.totals.release_errors > 0 || cell.text.find("errors ") != std::string::npos;
  if (c.stale_writes_refused_by_fenced > 0 || long_unavailable || errors || !r.fault_not_injected.empty())
    return cell_verdict::warn;
  return cell_verdict::good;
}

std::string to_html(const matrix& m, const run_context& context) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dlock compare, " +
         html_escaped(context.date_utc) + "</title><style>" + style + "</style></head><body>\n<h1>dlock compare</h1>" +
         "<p>Each backend under each fault: client processes contend for one lock and write to a recorded resource; a "
         "checker reads the history. Every cell is an observation of this run.</p>" +
         settings(m, context) + "\n<h2>Faults</h2>" + legend() + grid(m) + "\n" + speed_section(m) + "\n</body></html>\n";
}

}  // namespace dlock::compare
