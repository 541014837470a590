#pragma once
// What a reader can act on: each cell of `dlock compare` judged from what its run observed (never
// from what the backend declares), and each backend's row summed up.
//
//   safe               no two clients wrote at once, and the fault kept no one from a grant
//   safe with fencing  writes overlapped, but every overlapping pair carried two different fencing
//                      tokens and the fenced resource refused every stale write: a resource that
//                      checks the token keeps the data safe; one that does not took both writes
//   unavailable for D  no overlap, but no one was granted for D after the fault (or never again):
//                      the lock stayed with a paused or cut-off holder until it was back, nothing was
//                      granted while a majority was down, or no grant for over 3 ttls: safe, at that cost
//   unsafe             a stale write the fenced resource did not refuse, or an overlap the fence
//                      cannot order (a write without a token, or two with the same one)
//   not run: why       the fault does not apply, its server is unset, or it could not be injected
//
// The safety verdicts come first: a cell that overlapped is `unsafe` or `safe with fencing` however
// long anyone waited. Where D counts from, and when it makes the cell unavailable, depends on the
// fault (judged() in verdict.cpp, and verdict_legend()).
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock_compare/report.hpp"

namespace dlock::compare {

// In rank order, the worst last (a row's worst verdict is the highest of its cells that ran).
enum class verdict_kind { not_run, safe, unavailable, safe_with_fencing, unsafe };
inline constexpr std::size_t verdict_kinds = 5;

std::string_view to_string(verdict_kind k) noexcept;  // "safe", "safe with fencing", "unavailable", "unsafe", "not run"
std::string_view json_name(verdict_kind k) noexcept;  // "safe", "safe_with_fencing", "unavailable", "unsafe", "not_run"

// Where no fault-specific rule says (verdict_legend(): a pause, a partition, a majority lost), a
// grant later than this many ttls after the fault makes a safe cell `unavailable`: a lost grant
// expires within one ttl (a session-bound one at once), a restarted server's guard keeps it back
// up to a ttl and a second more (a restart guard), and a loaded machine adds to both.
inline constexpr int unavailable_beyond_ttls = 3;

struct cell_verdict {
  verdict_kind kind = verdict_kind::not_run;
  // unavailable: how long no one was granted; with never_granted, how long the run watched after
  // the fault without a grant (nullopt: no one was granted in the whole run).
  std::optional<shared_clock::duration> unavailable_for;
  bool never_granted = false;
  // not_run: why ("DLOCK_..._URI unset", "fault not injected: no holder was caught ...").
  std::string not_run_because;
  bool fault_not_injected = false;  // not_run although the cell ran: its fault could not be injected

  // "safe", "safe with fencing", "unavailable for 2.50s", "unavailable: never granted again (4.99s
  // watched)", "unavailable: no grant in the run", "unsafe", "not run: why".
  std::string text() const;
  // At most 7 characters, for the terminal's table: "safe", "fenced", "gap2.5s", "never", "UNSAFE",
  // "-" (not run), "?" (the fault could not be injected).
  std::string short_text() const;
};

cell_verdict verdict_of(const matrix_cell& cell, std::chrono::milliseconds ttl);

// A backend's row: its worst verdict and how many cells had each.
struct row_verdict {
  verdict_kind worst = verdict_kind::not_run;         // not_run only when no cell ran
  std::array<std::uint32_t, verdict_kinds> counts{};  // indexed by verdict_kind

  std::uint32_t count(verdict_kind k) const noexcept { return counts[static_cast<std::size_t>(k)]; }
  // "safe with fencing (4 safe, 1 unavailable, 3 safe with fencing, 8 not run)": the worst, then the
  // counts from the best; "not run" when no cell ran.
  std::string text() const;
  // At most 6 characters: "safe", "gap", "fenced", "UNSAFE", "-".
  std::string short_text() const;
};

row_verdict row_verdict_of(const matrix& m, const std::string& backend);

// The verdicts' definitions, as the reports' legends give them (plain text, lines under 110 columns).
std::string verdict_legend(std::chrono::milliseconds ttl);

}  // namespace dlock::compare
