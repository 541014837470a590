#include "dlock_compare/report.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "dlock_compare/families.hpp"
#include "dlock_compare/quorum.hpp"
#include "dlock_compare/text_table.hpp"
#include "dlock_compare/verdict.hpp"

namespace dlock::compare {

namespace {

using std::chrono::milliseconds;

std::string ms_text(milliseconds d) { return std::to_string(d.count()) + "ms"; }

std::string ms_or_null(const std::optional<shared_clock::duration>& d) {
  return d ? std::to_string(std::chrono::duration<double, std::milli>(*d).count()) : std::string("null");
}

// A cell in the Markdown: its verdict in bold, then what the run observed ("not run: why" alone).
std::string markdown_cell(const matrix_cell* cell, milliseconds ttl) {
  if (cell == nullptr) return "not run: not reached";
  const auto v = verdict_of(*cell, ttl);
  if (v.kind == verdict_kind::not_run && !v.fault_not_injected) return cell->text;
  const std::string head = v.fault_not_injected ? "not run" : v.text();
  return "**" + head + "**" + (cell->text == "ok" ? "" : ": " + cell->text);
}

// The Markdown table's rows: the header, then one row per backend: its verdict, then a cell per fault.
text_rows markdown_rows(const matrix& m) {
  text_rows rows;
  std::vector<std::string> header = {"backend", "verdict"};
  for (const auto f : m.faults) header.emplace_back(to_string(f));
  rows.push_back(header);
  for (const auto& b : m.backends) {
    std::vector<std::string> row = {b, row_verdict_of(m, b).text()};
    for (const auto f : m.faults) row.push_back(markdown_cell(m.find(b, f), m.ttl));
    rows.push_back(row);
  }
  return rows;
}

// Columns one space apart, no trailing blanks: 16 faults of 7 characters and the longest scheme
// fit 160 columns.
std::string tight_columns(const text_rows& rows) {
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i)
      line += (i ? " " : "") + row[i] + std::string(widths[i] - row[i].size(), ' ');
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// `items` after `head`, ", "-joined, wrapped at the terminal's width with continuation lines indented.
std::string wrapped(std::string head, const std::vector<std::string>& items) {
  constexpr std::size_t longest_head = 100;  // a reason may be long; the reports have it whole
  if (head.size() > longest_head) head = head.substr(0, longest_head - 4) + "...:";
  std::string out, line = head;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() + 1 + item.size() > terminal_columns && line.size() > head.size()) {
      out += line + "\n";
      line = std::string(head.size(), ' ');
    }
    line += " " + item;
  }
  return out + line + "\n";
}

// What the terminal's short verdicts and column headings mean; the details are the reports'.
std::string terminal_key(const matrix& m) {
  const auto limit = std::to_string((unavailable_beyond_ttls * m.ttl).count()) + "ms";
  std::vector<std::string> columns;
  for (const auto f : m.faults)
    if (short_name(f) != to_string(f)) columns.push_back(std::string(short_name(f)) + " " + std::string(to_string(f)));
  std::string out =
      "ttl " + ms_text(m.ttl) + ", " + std::to_string(m.clients) +
      " clients per cell (processes; threads of one for a " + "process-scope lock), healthy runs " +
      ms_text(m.duration) + "\n" + "safe      no two clients wrote at once, and the fault kept no one from a grant\n" +
      "fenced    safe with fencing: writes overlapped, but with different tokens, and the fence refused every stale "
      "write\n" +
      "gapD      unavailable for D: no overlap, but no grant for D after the fault (the lock stayed with a paused or "
      "cut-off\n" +
      "          holder, no majority, or over " + limit + "); never: never granted again\n" +
      "UNSAFE    a stale write the fence let through, or an overlap it cannot order (no token, or the same one)\n" +
      "- / ?     not run (why: in the reports) / the fault could not be injected; worst: the row's worst verdict\n";
  if (!columns.empty()) out += wrapped("columns:", columns);
  // A row of dashes explained: the backends none of whose cells ran, by the first cell's reason.
  std::vector<std::pair<std::string, std::vector<std::string>>> idle;
  for (const auto& b : m.backends) {
    if (row_verdict_of(m, b).worst != verdict_kind::not_run || m.faults.empty()) continue;
    const auto* first = m.find(b, m.faults.front());
    const auto why = first ? verdict_of(*first, m.ttl).text() : std::string("not run: not reached");
    const auto group = std::ranges::find(idle, why, &std::pair<std::string, std::vector<std::string>>::first);
    if (group == idle.end())
      idle.push_back({why, {b}});
    else
      group->second.push_back(b);
  }
  for (const auto& [why, backends] : idle) out += wrapped(why + ":", backends);
  out += "Each cell's observation, the verdicts' definitions and the checker's counts: --markdown, --html, --json.\n";
  return out;
}

// How the built backends end a connection on their servers, as each declared it
// (family::kill_described), one a line: "\n  A,\n  B", or "none declared".
std::string connection_kills_described() {
  std::string list;
  for (const auto* f : families())
    if (f->kill == connection_kill::server_command && !f->kill_described.empty())
      list += (list.empty() ? "\n  " : ",\n  ") + std::string(f->kill_described);
  return list.empty() ? std::string("none declared") : list;
}

}  // namespace

const matrix_cell* matrix::find(const std::string& backend, fault f) const {
  const auto it =
      std::ranges::find_if(cells, [&](const matrix_cell& c) { return c.backend == backend && c.scenario == f; });
  return it == cells.end() ? nullptr : &*it;
}

std::string legend(const matrix& m) {
  return "ttl " + ms_text(m.ttl) + ", " + std::to_string(m.clients) +
         " clients per cell (processes; a process-scope lock's are threads of one), healthy runs " +
         ms_text(m.duration) + "\n" + verdict_legend(m.ttl) +
         "Observations (after each verdict):\n"
         "  ok                         no overlap, no stale write, no error seen\n"
         "  overlaps N (unnotified M)  N pairs of critical sections wrote at once; in M the older holder's\n"
         "                             lost notification had not fired before the newer grant\n"
         "  stale writes: accepted N / refused M\n"
         "                             N writes carried a fencing token smaller than one already written: the\n"
         "                             naive resource accepted them, the fenced resource refused M\n"
         "  recovered in D             holder-kill: from the SIGKILL to the next grant (compare with the ttl)\n"
         "  down D, next grant E after the start\n"
         "                             server-restart: stopped for D; the first grant came E after it answered\n"
         "  not recovered in the run   no grant followed the fault before the run ended\n"
         "  next grant after D         the pauses: from the SIGSTOP to the next grant to anyone (a lock that\n"
         "                             stays with its paused holder is safe but unavailable that long)\n"
         "  killed K connection(s); holder told D after the kill, next grant to another E after the kill;\n"
         "  next grant F after the kill  connection-kill: the server ended the holder's K connections; D: its\n"
         "                             lost notification (or 'holder not told'); E: anyone else's grant;\n"
         "                             F: anyone's, the holder's own included\n"
         "  paused P; holder told D after the pause, next grant to another E after the pause; next grant F\n"
         "  after the resume           server-pause: the server was frozen for P; F: from its resume\n"
         "  killed WHERE: ...          kill-mid-acquire: where the client died inside its acquire (between its\n"
         "                             two commands, or at its grant), then recovered in D or never granted again\n"
         "  errors N                   acquire or release errors, or workers that failed\n"
         "  not run: why               the cell did not run, and why\n"
         "healthy: the clients contend; holder-kill: the holder is SIGKILLed inside its write; holder-pause: it is\n"
         "SIGSTOPped inside its write for 2.5 ttls, then resumed (a GC pause); pause-before-write: the first holder\n"
         "stops itself after its grant, before its write, for 2.5 ttls (Kleppmann's pause: its write then carries\n"
         "a stale token, which the fenced resource refuses once a successor wrote); server-restart: the server is\n"
         "stopped half a second in and started again (dlock-servers stop, start); connection-kill: the holder's\n"
         "connections are ended while it writes for 2 ttls, by the server's own command (" +
         connection_kills_described() +
         ";\nor, where it has none, a proxy silencing the holder until the server expires its session); server-pause:\n"
         "the server is SIGSTOPped for 2.5 ttls while the holder writes for 3, then resumed.\n"
         "partition: the holder's veth link is down for 2.5 ttls ('holder notified D before|after the next grant':\n"
         "its lost notification against the first grant to another client); clock-step: libfaketime steps the\n"
         "other clients' wall clocks 60s ahead while one holds; clock-slow: client 1's clocks, monotonic too, "
         "x0.25.\n" +
         "kill-mid-acquire: client 1, alone, takes the lock; where its acquire is two commands (SETNX or INCR, then\n"
         "EXPIRE) it is held between them; the others wait, and it is SIGKILLed there.\n" +
         quorum_legend();
}

std::string terminal_table(const matrix& m) {
  text_rows rows;
  std::vector<std::string> header = {"backend"};
  for (const auto f : m.faults) header.emplace_back(short_name(f));
  header.emplace_back("worst");
  rows.push_back(header);
  for (const auto& b : m.backends) {
    std::vector<std::string> row = {b};
    for (const auto f : m.faults) {
      const auto* cell = m.find(b, f);
      row.push_back(cell ? verdict_of(*cell, m.ttl).short_text() : "-");
    }
    row.push_back(row_verdict_of(m, b).short_text());
    rows.push_back(row);
  }
  return tight_columns(rows);
}

std::string worker_log_text(const matrix& m) {
  if (m.worker_log.empty()) return "The workers wrote nothing on stderr.\n";
  return "The workers' stderr (lease-lost notices, client libraries' logs; each line after its cell), " +
         std::to_string(m.worker_log_lines) + " lines: " + m.worker_log + "\n";
}

std::string to_text(const matrix& m) {
  return terminal_table(m) + "\n" + terminal_key(m) + worker_log_text(m) + speed_text(m.speed, terminal_columns);
}

std::string to_markdown(const matrix& m) {
  return markdown_table(markdown_rows(m)) + "\n```\n" + legend(m) + "```\n" + worker_log_text(m) +
         speed_markdown(m.speed);
}

std::string to_json(const matrix& m) {
  constexpr std::size_t max_messages_listed = 20;
  std::string out = "{\"ttl_ms\": " + std::to_string(m.ttl.count()) +
                    ", \"duration_ms\": " + std::to_string(m.duration.count()) +
                    ", \"clients\": " + std::to_string(m.clients) +
                    ", \"unavailable_beyond_ms\": " + std::to_string((unavailable_beyond_ttls * m.ttl).count()) +
                    ", \"worker_log\": " + (m.worker_log.empty() ? std::string("null") : json_string(m.worker_log)) +
                    ", \"worker_log_lines\": " + std::to_string(m.worker_log_lines) + ",\n \"backends\": [";
  for (std::size_t i = 0; i < m.backends.size(); ++i) {
    const auto& b = m.backends[i];
    const auto row = row_verdict_of(m, b);
    out += std::string(i ? "," : "") + "\n  {\"backend\": " + json_string(b) +
           ", \"unsafe\": " + (std::ranges::find(m.unsafe_backends, b) != m.unsafe_backends.end() ? "true" : "false") +
           ", \"verdict\": " + json_string(row.text()) + ", \"worst\": \"" + std::string(json_name(row.worst)) +
           "\", \"counts\": {";
    for (std::size_t k = 0; k < verdict_kinds; ++k)
      out += std::string(k ? ", " : "") + "\"" + std::string(json_name(static_cast<verdict_kind>(k))) +
             "\": " + std::to_string(row.counts[k]);
    out += "}}";
  }
  out += "\n ],\n \"cells\": [";
  bool first = true;
  for (const auto& c : m.cells) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    const auto v = verdict_of(c, m.ttl);
    out += "{\"backend\": " + json_string(c.backend) +
           ", \"scenario\": " + json_string(std::string(to_string(c.scenario))) +
           ", \"ran\": " + (c.result ? "true" : "false") + ", \"observation\": " + json_string(c.text) +
           ", \"verdict\": " + json_string(v.text()) + ", \"verdict_kind\": \"" + std::string(json_name(v.kind)) +
           "\"" + ", \"unavailable_for_ms\": " + ms_or_null(v.unavailable_for) +
           ", \"never_granted\": " + (v.never_granted ? "true" : "false") +
           ", \"fault_injected\": " + (v.fault_not_injected || !c.result ? "false" : "true") +
           ", \"worker_messages\": " + std::to_string(c.worker_messages.size()) + ", \"worker_messages_listed\": [";
    for (std::size_t i = 0; i < c.worker_messages.size() && i < max_messages_listed; ++i)
      out += (i ? ", " : "") + json_string(c.worker_messages[i]);
    out += "]";
    if (c.result) {
      const auto& r = *c.result;
      out += ", \"uri\": " + json_string(c.uri);
      out += ", \"victim\": " + (r.victim ? std::to_string(*r.victim) : std::string("null"));
      out += ", \"recovered_after_ms\": " +
             (r.recovered_after ? std::to_string(std::chrono::duration<double, std::milli>(*r.recovered_after).count())
                                : std::string("null"));
      out += ", \"paused_for_ms\": " + std::to_string(r.paused_for.count());
      out += ", \"server_down_for_ms\": " +
             (r.server_down_for ? std::to_string(std::chrono::duration<double, std::milli>(*r.server_down_for).count())
                                : std::string("null"));
      out += ", \"fault_not_injected\": " + json_string(r.fault_not_injected);
      out +=
          ", \"victim_told_after_ms\": " +
          (r.victim_told_after ? std::to_string(std::chrono::duration<double, std::milli>(*r.victim_told_after).count())
                               : std::string("null"));
      out += ", \"successor_granted_after_ms\": " +
             (r.successor_granted_after
                  ? std::to_string(std::chrono::duration<double, std::milli>(*r.successor_granted_after).count())
                  : std::string("null"));
      out += ", \"connections_killed\": " + std::to_string(r.connections_killed);
      if (r.quorum) out += ", \"quorum\": " + to_json(*r.quorum);
      out += ", \"check\": " + to_json(r.check);
    }
    out += "}";
  }
  return out + "\n ],\n \"speed\": " + speed_json(m.speed) + "}\n";
}

}  // namespace dlock::compare
