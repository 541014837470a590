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
.safe{background:#c8ebc8}.fenced{background:#cfe2f7}.unavailable{background:#ffe0a3}.unsafe{background:#f6b3b3}
.none{background:#e4e4e4;color:#666}
td.cell b,td.verdict b{display:block}
.legend dt{font-weight:600;margin-top:4px}.legend dd{margin:0 0 0 18px}
tr.unsafe th{background:repeating-linear-gradient(45deg,#fbe3e3,#fbe3e3 6px,#fff 6px,#fff 12px)}
.badge{display:inline-block;margin-left:6px;padding:0 5px;border-radius:3px;background:#b00;color:#fff;font-size:11px}
.legend span.swatch{display:inline-block;width:14px;height:14px;border:1px solid #999;vertical-align:middle;margin:0 4px 0 14px}
svg.chart{display:block;margin:8px 0 16px;font-size:11px}
svg .grid{stroke:#ddd;stroke-width:1}svg .chart-title{font-size:13px;font-weight:600}
svg .small{font-size:10px;fill:#333}svg .unsafe-label{fill:#b00}
td.num{text-align:right;font-variant-numeric:tabular-nums}
)";

const char* class_of(verdict_kind k) {
  switch (k) {
    case verdict_kind::safe: return "safe";
    case verdict_kind::safe_with_fencing: return "fenced";
    case verdict_kind::unavailable: return "unavailable";
    case verdict_kind::unsafe: return "unsafe";
    case verdict_kind::not_run: return "none";
  }
  return "none";
}

std::string ms(shared_clock::duration d) {
  return latency_text(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
}

// The tooltip: what the checker counted, beyond the cell's short text.
std::string details(const matrix_cell& cell, const cell_verdict& v) {
  if (!cell.result) return cell.text;
  const auto& r = *cell.result;
  const auto& c = r.check;
  std::string out = v.text() + "\n" + cell.text + "\nuri: " + cell.uri;
  if (!r.fault_not_injected.empty()) out += "\nfault not injected: " + r.fault_not_injected;
  if (r.victim) out += "\nvictim: client " + std::to_string(*r.victim);
  if (r.paused_for.count() > 0) out += "\npaused for: " + std::to_string(r.paused_for.count()) + "ms";
  if (r.server_down_for) out += "\nserver down for: " + ms(*r.server_down_for);
  if (r.recovered_after) out += "\nnext grant after the fault: " + ms(*r.recovered_after);
  out += "\nclients " + std::to_string(c.totals.clients) + ", acquires " + std::to_string(c.totals.acquires) +
         ", grants " + std::to_string(c.totals.grants) + ", writes " + std::to_string(c.totals.writes) + "\noverlaps " +
         std::to_string(c.overlap_count()) + " (unnotified " + std::to_string(c.unnotified_losses) +
         ", without two different tokens " + std::to_string(c.unfenced_overlaps) + ")" +
         "\nstale writes: accepted by the naive resource " + std::to_string(c.stale_writes_accepted_by_naive) +
         ", refused by the fenced one " + std::to_string(c.stale_writes_refused_by_fenced) + "\nlost notifications " +
         std::to_string(c.totals.lost_notifications) + ", releases not owner " +
         std::to_string(c.totals.release_not_owner) + "\nacquire timeouts " +
         std::to_string(c.totals.acquire_timeouts) + ", acquire errors " + std::to_string(c.totals.acquire_errors) +
         ", release errors " + std::to_string(c.totals.release_errors) + "\nlongest unavailable " +
         ms(c.longest_unavailable) + ", longest wait for a grant " + ms(c.longest_wait_for_grant);
  if (!cell.worker_messages.empty())
    out += "\nworkers' stderr: " + std::to_string(cell.worker_messages.size()) +
           " lines, the first: " + cell.worker_messages.front();
  return out;
}

bool is_unsafe(const matrix& m, const std::string& backend) {
  return std::ranges::find(m.unsafe_backends, backend) != m.unsafe_backends.end();
}

std::string row_header(const matrix& m, const std::string& backend) {
  return "<th>" + html_escaped(backend) + (is_unsafe(m, backend) ? "<span class=\"badge\">UNSAFE</span>" : "") +
         "</th>";
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

std::string html_legend(const matrix& m) {
  const auto limit = std::to_string((unavailable_beyond_ttls * m.ttl).count()) + "ms";
  const auto entry = [](const char* cls, const std::string& term, const std::string& text) {
    return "<dt><span class=\"swatch " + std::string(cls) + "\"></span>" + html_escaped(term) + "</dt><dd>" +
           html_escaped(text) + "</dd>";
  };
  return "<div class=\"legend\"><dl>" +
         entry("safe", "safe", "no two clients wrote at once, and the fault kept no one from a grant") +
         entry(
             "fenced", "safe with fencing",
             "writes overlapped, but each overlapping pair carried two different fencing tokens and the fenced "
             "resource "
             "refused every stale write: a resource that checks the token keeps the data safe, one that does not took "
             "both writes") +
         entry(
             "unavailable", "unavailable for D",
             "no overlap, but no one was granted for D after the fault, or never again: the lock stayed with a paused "
             "or cut-off holder until it was back, nothing was granted while a majority was down, or no grant for "
             "over " +
                 limit + " (3 ttls); safe, at that cost") +
         entry("unsafe", "unsafe",
               "a stale write the fenced resource did not refuse, or an overlap it cannot order (a write without a "
               "token, "
               "or two with the same one)") +
         entry("none", "not run: why",
               "the fault does not apply, the server is not set, or the fault could not be injected") +
         "</dl><p>A row's verdict is its worst cell's, with the counts. Hover over a cell for what the checker "
         "counted. "
         "Rows marked <span class=\"badge\">UNSAFE</span> are the well-known broken recipes, run to show their "
         "failures; never use them.</p><details><summary>The definitions in full, and the observations' "
         "words</summary><pre>" +
         html_escaped(compare::legend(m)) + "</pre></details><p>" + html_escaped(worker_log_text(m)) + "</p></div>";
}

std::string grid(const matrix& m) {
  std::string out = "<table class=\"matrix\"><tr><th>backend</th><th>verdict</th>";
  for (const auto f : m.faults) out += "<th>" + html_escaped(std::string(to_string(f))) + "</th>";
  out += "</tr>";
  for (const auto& b : m.backends) {
    const auto row = row_verdict_of(m, b);
    out += std::string("<tr") + (is_unsafe(m, b) ? " class=\"unsafe\"" : "") + ">" + row_header(m, b) +
           "<td class=\"verdict " + class_of(row.worst) + "\">" + html_escaped(row.text()) + "</td>";
    for (const auto f : m.faults) {
      const auto* cell = m.find(b, f);
      if (cell == nullptr) {
        out += "<td class=\"cell none\" title=\"not run: not reached\"><b>not run</b>not reached</td>";
        continue;
      }
      const auto v = verdict_of(*cell, m.ttl);
      const std::string head = v.kind == verdict_kind::not_run ? "not run" : v.text();
      const std::string rest = v.kind == verdict_kind::not_run && !v.fault_not_injected ? v.not_run_because
                               : cell->text == "ok"                                     ? ""
                                                                                        : cell->text;
      out += std::string("<td class=\"cell ") + css_class_of(v) + "\" title=\"" + html_escaped(details(*cell, v)) +
             "\"><b>" + html_escaped(head) + "</b>" + html_escaped(rest) + "</td>";
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
         table + svg_cdf("uncontended acquire+release latency, 1 client: cumulative distribution", cycles) +
         svg_cdf("handoff under contention (" + n + " clients, one name): release to the next waiting client's grant",
                 handoffs);
}

}  // namespace

const char* css_class_of(const cell_verdict& v) noexcept { return class_of(v.kind); }

std::string to_html(const matrix& m, const run_context& context) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dlock compare, " +
         html_escaped(context.date_utc) + "</title><style>" + style + "</style></head><body>\n<h1>dlock compare</h1>" +
         "<p>Each backend under each fault: client processes contend for one lock and write to a recorded resource; a "
         "checker reads the history. Every cell is an observation of this run.</p>" +
         settings(m, context) + "\n<h2>Faults</h2>" + html_legend(m) + grid(m) + "\n" + speed_section(m) +
         "\n</body></html>\n";
}

}  // namespace dlock::compare
