#include "dlock_compare/verdict.hpp"

#include <cstdio>

#include <algorithm>

namespace dlock::compare {

namespace {

using std::chrono::milliseconds;

std::string seconds(shared_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fs", std::chrono::duration<double>(d).count());
  return buf;
}

// "2.5s", "12s", "999s": at most 4 characters, for "gap" + this in 7.
std::string compact_seconds(shared_clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char buf[16];
  if (s < 9.95)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else
    std::snprintf(buf, sizeof buf, "%.0fs", std::min(s, 999.0));
  return buf;
}

// How long no one was granted after the fault, and whether that is the cell's result.
struct gap {
  std::optional<shared_clock::duration> length;  // with never: how long the run watched, if known
  bool never = false;                            // no grant followed
  bool unavailable = false;                      // the verdict is `unavailable`
};

gap judged(const matrix_cell& cell, milliseconds ttl) {
  const auto& r = *cell.result;
  const auto beyond_the_limit = [&](std::optional<shared_clock::duration> d,
                                    std::optional<shared_clock::duration> watched) {
    if (!d) return gap{watched, true, true};
    return gap{d, false, *d > unavailable_beyond_ttls * ttl};
  };
  if (r.check.totals.grants == 0) return {std::nullopt, true, true};
  switch (cell.scenario) {
    // The lock stayed with its stopped (cut-off) holder: nobody (no other client) was granted
    // before it was resumed (its link came back), however long the pause: from the SIGSTOP (the
    // cut) to the next grant.
    case fault::holder_pause:
    case fault::pause_before_write:
    case fault::partition:
      if (!r.recovered_after) return {r.watched_after_fault, true, true};
      return {*r.recovered_after, false, *r.recovered_after >= r.paused_for};
    // A dead holder's lock, a restarted or resumed server: from the kill, the server's start or
    // its resume to the next grant, against the limit (the server's own outage is the fault's).
    case fault::holder_kill:
    case fault::kill_mid_acquire:
    case fault::server_restart:
    case fault::server_pause: return beyond_the_limit(r.recovered_after, r.watched_after_fault);
    // The majority gone: nobody granted while it was down is the result, from the first stop to
    // the next grant (while no majority answers, an acquire fails at once and its client sleeps
    // before the next, so the checker's waits have holes and cannot measure it).
    case fault::masters_majority_lost:
    case fault::ensemble_majority_lost:
      if (!r.quorum) break;
      if (!r.quorum->next_grant_after_fault) return {std::nullopt, true, true};
      return {*r.quorum->next_grant_after_fault, false, r.quorum->grants_while_down == 0};
    default: break;
  }
  // Another quorum fault that cost the holder its lock: from the fault to the next grant.
  if (r.quorum && r.quorum->holder && !r.quorum->holder_kept_lock)
    return beyond_the_limit(r.quorum->next_grant_after_fault, std::nullopt);
  // The holder goes on running and may keep its lock (no fault, a connection ended, a minority
  // lost, a clock faked): the longest stretch in which a client waited and no holder had the
  // lock, as the holders saw it (a holder told it lost its lock stops holding).
  return beyond_the_limit(r.check.longest_unavailable, std::nullopt);
}

}  // namespace

std::string_view to_string(verdict_kind k) noexcept {
  switch (k) {
    case verdict_kind::not_run: return "not run";
    case verdict_kind::safe: return "safe";
    case verdict_kind::unavailable: return "unavailable";
    case verdict_kind::safe_with_fencing: return "safe with fencing";
    case verdict_kind::unsafe: return "unsafe";
  }
  return "?";
}

std::string_view json_name(verdict_kind k) noexcept {
  switch (k) {
    case verdict_kind::not_run: return "not_run";
    case verdict_kind::safe: return "safe";
    case verdict_kind::unavailable: return "unavailable";
    case verdict_kind::safe_with_fencing: return "safe_with_fencing";
    case verdict_kind::unsafe: return "unsafe";
  }
  return "?";
}

std::string cell_verdict::text() const {
  switch (kind) {
    case verdict_kind::not_run: return "not run: " + not_run_because;
    case verdict_kind::unavailable:
      if (!never_granted) return "unavailable for " + seconds(unavailable_for.value_or(shared_clock::duration{}));
      if (!unavailable_for) return "unavailable: no grant in the run";
      return "unavailable: never granted again (" + seconds(*unavailable_for) + " watched)";
    default: return std::string(to_string(kind));
  }
}

std::string cell_verdict::short_text() const {
  switch (kind) {
    case verdict_kind::not_run: return fault_not_injected ? "?" : "-";
    case verdict_kind::safe: return "safe";
    case verdict_kind::unavailable:
      return never_granted ? "never" : "gap" + compact_seconds(unavailable_for.value_or(shared_clock::duration{}));
    case verdict_kind::safe_with_fencing: return "fenced";
    case verdict_kind::unsafe: return "UNSAFE";
  }
  return "?";
}

cell_verdict verdict_of(const matrix_cell& cell, milliseconds ttl) {
  cell_verdict v;
  if (!cell.result) {
    constexpr std::string_view prefix = "not run: ";
    v.not_run_because = cell.text.starts_with(prefix) ? cell.text.substr(prefix.size()) : cell.text;
    return v;
  }
  const auto& r = *cell.result;
  const auto& c = r.check;
  // Safety first, whatever the fault did to availability: what the data went through.
  if (c.stale_writes_accepted_by_naive > c.stale_writes_refused_by_fenced || c.unfenced_overlaps > 0) {
    v.kind = verdict_kind::unsafe;
    return v;
  }
  if (c.overlap_count() > 0) {
    v.kind = verdict_kind::safe_with_fencing;
    return v;
  }
  if (!r.fault_not_injected.empty()) {
    v.fault_not_injected = true;
    v.not_run_because = "fault not injected: " + r.fault_not_injected;
    return v;
  }
  const auto g = judged(cell, ttl);
  if (g.unavailable) {
    v.kind = verdict_kind::unavailable;
    v.unavailable_for = g.length;
    v.never_granted = g.never;
    return v;
  }
  v.kind = verdict_kind::safe;
  return v;
}

std::string row_verdict::text() const {
  if (worst == verdict_kind::not_run) return "not run";
  std::string counted;
  for (const auto k : {verdict_kind::safe, verdict_kind::unavailable, verdict_kind::safe_with_fencing,
                       verdict_kind::unsafe, verdict_kind::not_run})
    if (count(k) > 0)
      counted += (counted.empty() ? "" : ", ") + std::to_string(count(k)) + " " + std::string(to_string(k));
  return std::string(to_string(worst)) + " (" + counted + ")";
}

std::string row_verdict::short_text() const {
  switch (worst) {
    case verdict_kind::not_run: return "-";
    case verdict_kind::safe: return "safe";
    case verdict_kind::unavailable: return "gap";
    case verdict_kind::safe_with_fencing: return "fenced";
    case verdict_kind::unsafe: return "UNSAFE";
  }
  return "?";
}

row_verdict row_verdict_of(const matrix& m, const std::string& backend) {
  row_verdict row;
  for (const auto f : m.faults) {
    const auto* cell = m.find(backend, f);
    const auto kind = cell ? verdict_of(*cell, m.ttl).kind : verdict_kind::not_run;
    ++row.counts[static_cast<std::size_t>(kind)];
    if (kind > row.worst) row.worst = kind;
  }
  return row;
}

std::string verdict_legend(milliseconds ttl) {
  std::string text =
      "Verdicts (each cell's, from what its run observed; the row's is its worst cell, with the counts):\n"
      "  safe               no two clients wrote at once, and the fault kept no one from a grant (below)\n"
      "  safe with fencing  writes overlapped, but each overlapping pair carried two different fencing tokens and\n"
      "                     the fenced resource refused every stale write (a token smaller than one already\n"
      "                     written): a resource that checks the token keeps the data safe; one that does not\n"
      "                     took both writes. A holder told it lost its lock that writes on still overlaps: a\n"
      "                     write already under way is what fencing is for\n"
      "  unavailable for D  no overlap, but no one was granted for D after the fault: the lock stayed with a\n"
      "                     holder that could not use it, or nothing could grant; safe, at that cost. 'never\n"
      "                     granted again': no grant to the end of the run (how long it watched)\n"
      "  unsafe             a stale write the fenced resource did not refuse, or an overlap it cannot order (a\n"
      "                     write without a token, or two with the same one): the data was not protected\n"
      "  not run: why       the fault does not apply, the server is not set, or the fault could not be injected\n"
      "Unavailable means: holder-pause, pause-before-write: no grant from the SIGSTOP until the holder was resumed;\n"
      "partition: no grant to another client from the cut until the link was back; masters-majority-lost,\n"
      "ensemble-majority-lost: no grant while the majority was down (D from the first stop); holder-kill,\n"
      "kill-mid-acquire: no grant for over LIMIT (3 ttls) after the kill; server-restart, server-pause:\n"
      "over LIMIT from the server's start or resume (its outage is the fault's, not the lock's); a quorum\n"
      "fault that cost the holder its lock: over LIMIT from the fault; the rest (healthy, connection-kill,\n"
      "the clock faults, a quorum fault whose holder kept its lock): a client waited over LIMIT while no\n"
      "holder had the lock, as the holders saw it. 3 ttls: a lost grant expires within one, a restarted\n"
      "server's guard keeps it back up to a ttl and a second more, and a loaded machine adds to both.\n";
  const auto limit = std::to_string((unavailable_beyond_ttls * ttl).count()) + "ms";
  for (auto at = text.find("LIMIT"); at != std::string::npos; at = text.find("LIMIT", at + limit.size()))
    text.replace(at, 5, limit);
  return text;
}

}  // namespace dlock::compare
