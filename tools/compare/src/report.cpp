#include "dlock_compare/report.hpp"

#include <algorithm>
#include <cstdio>

namespace dlock::compare {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

std::string pad(const std::string& s, std::size_t width) { return s + std::string(width - std::min(width, s.size()), ' '); }

// The table's rows: the header, then one row per backend, each a cell per fault.
std::vector<std::vector<std::string>> rows_of(const matrix& m) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"backend"};
  for (const auto f : m.faults) header.emplace_back(to_string(f));
  rows.push_back(header);
  for (const auto& b : m.backends) {
    std::vector<std::string> row = {b};
    for (const auto f : m.faults) {
      const auto* cell = m.find(b, f);
      row.push_back(cell ? cell->text : "not run: not reached");
    }
    rows.push_back(row);
  }
  return rows;
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (const char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

const matrix_cell* matrix::find(const std::string& backend, fault f) const {
  const auto it = std::ranges::find_if(cells, [&](const matrix_cell& c) { return c.backend == backend && c.scenario == f; });
  return it == cells.end() ? nullptr : &*it;
}

std::string legend(const matrix& m) {
  return "ttl " + ms_text(m.ttl) + ", " + std::to_string(m.clients) + " client processes per cell, healthy runs " +
         ms_text(m.duration) +
         "\n"
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
         "  killed WHERE: ...          kill-mid-acquire: where the client died inside its acquire (between its\n"
         "                             two commands, or at its grant), then recovered in D or never granted again\n"
         "  errors N                   acquire or release errors, or workers that failed\n"
         "  not run: why               the cell did not run, and why\n"
         "healthy: the clients contend; holder-kill: the holder is SIGKILLed inside its write; holder-pause: it is\n"
         "SIGSTOPped inside its write for 2.5 ttls, then resumed (a GC pause); pause-before-write: the first holder\n"
         "stops itself after its grant, before its write, for 2.5 ttls (Kleppmann's pause: its write then carries\n"
         "a stale token, which the fenced resource refuses once a successor wrote); server-restart: the server is\n"
         "stopped half a second in and started again (dlock-servers stop, start).\n"
         "kill-mid-acquire: client 1, alone, takes the lock; where its acquire is two commands (SETNX or INCR, then\n"
         "EXPIRE) it is held between them; the others wait, and it is SIGKILLed there.\n";
}

std::string to_text(const matrix& m) {
  const auto rows = rows_of(m);
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) line += (i ? "  " : "") + pad(row[i], widths[i]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out + "\n" + legend(m);
}

std::string to_markdown(const matrix& m) {
  const auto rows = rows_of(m);
  std::string out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (const auto& cell : rows[r]) out += " " + markdown_cell(cell) + " |";
    out += "\n";
    if (r == 0) {
      out += "|";
      for (std::size_t i = 0; i < rows[r].size(); ++i) out += "---|";
      out += "\n";
    }
  }
  return out + "\n```\n" + legend(m) + "```\n";
}

std::string to_json(const matrix& m) {
  std::string out = "{\"ttl_ms\": " + std::to_string(m.ttl.count()) + ", \"duration_ms\": " +
                    std::to_string(m.duration.count()) + ", \"clients\": " + std::to_string(m.clients) +
                    ",\n \"cells\": [";
  bool first = true;
  for (const auto& c : m.cells) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += "{\"backend\": " + json_string(c.backend) + ", \"scenario\": " + json_string(std::string(to_string(c.scenario))) +
           ", \"ran\": " + (c.result ? "true" : "false") + ", \"observation\": " + json_string(c.text);
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
      out += ", \"check\": " + to_json(r.check);
    }
    out += "}";
  }
  return out + "\n ]}\n";
}

}  // namespace dlock::compare
