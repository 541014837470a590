#pragma once
// A critical section reassembled from the history: the events of one (client, attempt).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dlock_compare/event.hpp"

namespace dlock::compare {

enum class release_outcome { none, released, not_owner, failed };

struct section {
  std::uint32_t client = 0;
  std::uint32_t attempt = 0;
  std::optional<std::uint64_t> token;
  std::optional<instant> acquire_started;
  std::optional<instant> granted;
  std::optional<instant> gave_up;  // acquire_timed_out or acquire_failed
  bool acquire_failed = false;
  std::optional<instant> write_begin;
  std::optional<instant> write_end;
  std::optional<instant> lost;  // the first time lost_token fired
  std::optional<instant> release_done;
  release_outcome release = release_outcome::none;
  fence_verdict verdict = fence_verdict::none;
  bool held_at_begin = false;
  bool held_at_end = false;
  instant last_event{};  // where a section cut short by its process' death stops

  bool wrote() const noexcept { return write_begin.has_value(); }
  // The write's interval; a write never finished (its process was killed) ends at its last event.
  instant write_finish() const noexcept { return write_end.value_or(last_event); }
  // The grant as its holder saw it: from the grant to the release, or to the lost notification
  // if that came first; a section cut short holds until its last event.
  instant hold_end() const noexcept;
};

// Groups events by (client, attempt), ordered by client then attempt.
std::vector<section> assemble_sections(std::span<const event> history);

// The clients holding a grant at the end of `history` (granted, not yet released and not told
// it was lost), for a scenario that must find the holder to pause or kill while the run goes on.
std::vector<std::uint32_t> holders_at_end(std::span<const event> history);

}  // namespace dlock::compare
