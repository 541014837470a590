#include "dlock_compare/report.hpp"

#include "dlock_compare/quorum.hpp"

#include <algorithm>
#include <cstdio>

#include "dlock_compare/text_table.hpp"

namespace dlock::compare {

namespace {

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

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
         "connections are ended on the server (Redis CLIENT KILL, PostgreSQL pg_terminate_backend, MariaDB KILL)\n"
         "while it writes for 2 ttls; server-pause: the server is SIGSTOPped for 2.5 ttls while the holder writes\n"
         "for 3, then resumed.\n"
         "partition: the holder's veth link is down for 2.5 ttls ('holder notified D before|after the next grant':\n"
         "its lost notification against the first grant to another client); clock-step: libfaketime steps the\n"
         "other clients' wall clocks 60s ahead while one holds; clock-slow: client 1's clocks, monotonic too, x0.25.\n" +
         "kill-mid-acquire: client 1, alone, takes the lock; where its acquire is two commands (SETNX or INCR, then\n"
         "EXPIRE) it is held between them; the others wait, and it is SIGKILLed there.\n" +
         quorum_legend();
}

std::string to_text(const matrix& m) {
  return aligned_columns(rows_of(m)) + "\n" + legend(m) + speed_text(m.speed);
}

std::string to_markdown(const matrix& m) {
  return markdown_table(rows_of(m)) + "\n```\n" + legend(m) + "```\n" + speed_markdown(m.speed);
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
      out += ", \"victim_told_after_ms\": " +
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
