#pragma once
// One entry of a comparison run's history: a fixed-size binary record that a client process
// appends with a single O_APPEND write(2), so records of concurrent processes never interleave.
// A critical section is the run of events sharing (client, attempt), Jepsen-style:
//   acquire_started -> granted | acquire_timed_out | acquire_failed
//   granted -> write_begin -> write_end -> released | release_not_owner | release_failed
// and `lost` whenever the lease's lost_token fired while the section was under way.
// A process killed mid-section simply leaves its section unfinished; the checker copes.
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

enum class event_kind : std::uint8_t {
  acquire_started = 1,
  granted,
  acquire_timed_out,  // the acquire deadline passed with the lock held by someone else
  acquire_failed,     // the acquire reported an error (server unreachable past the deadline, ...)
  write_begin,        // the critical section's write began (carries the fenced resource's verdict)
  write_end,
  lost,  // the lease's lost_token fired
  released,
  release_not_owner,  // release found the lock no longer ours: the section was not protected
  release_failed,     // release reported another error
};
std::string_view to_string(event_kind k) noexcept;

// What the fenced resource said to a write (the naive resource accepts every write).
enum class fence_verdict : std::uint8_t {
  none = 0,      // not a write_begin
  accepted = 1,  // the token was not smaller than the highest the resource had seen
  refused = 2,   // a smaller token: a stale holder, refused
  no_token = 3,  // the backend gives no fencing token: the fenced resource cannot judge it
};
std::string_view to_string(fence_verdict v) noexcept;

struct event {
  static constexpr std::uint32_t format_tag = 0x31434c44;  // "DLC1" little-endian: format version 1

  std::uint32_t format = format_tag;
  std::uint32_t client = 0;   // the worker's id, unique within a run
  std::uint32_t attempt = 0;  // the worker's acquire attempt number: groups a section's events
  event_kind kind{};
  fence_verdict verdict = fence_verdict::none;
  std::uint8_t has_token = 0;
  std::uint8_t held = 0;    // write_begin / write_end: lease.held() at that instant
  std::uint64_t token = 0;  // the fencing token, when has_token
  std::int64_t at_ns = 0;   // shared_clock nanoseconds

  instant at() const noexcept { return instant(shared_clock::duration(at_ns)); }
  std::optional<std::uint64_t> fencing_token() const noexcept {
    return has_token ? std::optional<std::uint64_t>(token) : std::nullopt;
  }
};
static_assert(std::is_trivially_copyable_v<event> && sizeof(event) == 32,
              "the history file format is this struct's bytes: keep it fixed-size and padding-free");

// The event `kind` of `client`'s attempt `attempt` at `at`, with the fencing token it carried (if
// any); for a write, the fenced resource's verdict (write_begin) and lease.held() then.
event make_event(event_kind kind, std::uint32_t client, std::uint32_t attempt, instant at,
                 std::optional<std::uint64_t> token = std::nullopt, fence_verdict verdict = fence_verdict::none,
                 bool held = false) noexcept;

}  // namespace dlock::compare
