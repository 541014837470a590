#pragma once
// The checker: reads a run's history afterwards and measures what went wrong.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dlock_compare/event.hpp"
#include "dlock_compare/section.hpp"

namespace dlock::compare {

struct section_id {
  std::uint32_t client = 0;
  std::uint32_t attempt = 0;
  friend bool operator==(const section_id&, const section_id&) = default;
};

// Two writes whose [begin, end] intervals intersect. `older` is the one granted first.
struct overlap {
  section_id older;
  section_id newer;
  shared_clock::duration length{};  // how long both wrote at once
  // The older holder's lost_token had fired before the newer grant (a lock that tells its holder
  // in time lets the holder stop before the other one starts).
  bool notified_before_newer_grant = false;
  // Both writes carried a fencing token, and different ones: a fenced resource can order them and
  // refuse the older holder's writes once the newer one wrote. Without a token (or with equal
  // ones) nothing can tell the two writers apart: such an overlap is unsafe whatever a fence does.
  bool fenced = false;
};

struct counts {
  std::uint64_t clients = 0;
  std::uint64_t acquires = 0;  // acquire attempts started
  std::uint64_t grants = 0;
  std::uint64_t acquire_timeouts = 0;
  std::uint64_t acquire_errors = 0;
  std::uint64_t writes = 0;             // writes begun (each accepted by the naive resource)
  std::uint64_t writes_unfinished = 0;  // begun, never ended: the process died or was stopped
  std::uint64_t writes_without_token = 0;
  std::uint64_t writes_begun_not_held = 0;  // lease.held() was already false when the write began
  std::uint64_t writes_ended_not_held = 0;  // ... or when it ended: the holder can know it was unprotected
  std::uint64_t lost_notifications = 0;
  std::uint64_t releases = 0;           // released cleanly
  std::uint64_t release_not_owner = 0;  // release found the lock no longer ours
  std::uint64_t release_errors = 0;
};

struct check_result {
  counts totals;
  // (a) every pair of intersecting writes
  std::vector<overlap> overlaps;
  // (b) writes carrying a token smaller than one already written: the naive resource accepted
  // every one of them; the fenced resource's verdicts, recorded at write time, say how many it
  // refused (equal when the fence works: both judge in the order of the write_begin instants).
  std::uint64_t stale_writes_accepted_by_naive = 0;
  std::uint64_t stale_writes_refused_by_fenced = 0;
  std::uint64_t writes_refused_by_fenced = 0;  // every refusal, stale by the history or not
  // (c) overlaps whose older holder had not been told (lost_token) before the newer grant
  std::uint64_t unnotified_losses = 0;
  // overlaps a fenced resource cannot order (overlap::fenced false): a write without a token, or
  // two writes with the same one
  std::uint64_t unfenced_overlaps = 0;
  // (d) the longest stretch in which someone was waiting and no one held the lock (as each
  // holder saw it: grant to release or lost notification), and where it began
  shared_clock::duration longest_unavailable{};
  std::optional<instant> longest_unavailable_from;
  // the longest single acquire wait that ended in a grant: the time to recover after a fault
  shared_clock::duration longest_wait_for_grant{};

  std::uint64_t overlap_count() const noexcept { return overlaps.size(); }
};

check_result check(std::span<const event> history);
check_result check(std::span<const section> sections);

// The time to recover from a fault injected at `fault_at`: from then to the first grant after
// it (to any client), or nullopt when no grant followed. A scenario knows when it struck.
std::optional<shared_clock::duration> time_to_recover(std::span<const section> sections, instant fault_at);

// The result as one JSON object (durations in milliseconds with fractions, instants in
// shared_clock nanoseconds). At most `max_overlaps_listed` overlaps are listed; the count is whole.
std::string to_json(const check_result& r, std::size_t max_overlaps_listed = 20);

}  // namespace dlock::compare
