#include "dlock_compare/event.hpp"

namespace dlock::compare {

event make_event(event_kind kind, std::uint32_t client, std::uint32_t attempt, instant at,
                 std::optional<std::uint64_t> token, fence_verdict verdict, bool held) noexcept {
  event e;
  e.client = client;
  e.attempt = attempt;
  e.kind = kind;
  e.verdict = verdict;
  e.has_token = token.has_value();
  e.token = token.value_or(0);
  e.held = held;
  e.at_ns = at.time_since_epoch().count();
  return e;
}

std::string_view to_string(event_kind k) noexcept {
  switch (k) {
    case event_kind::acquire_started: return "acquire_started";
    case event_kind::granted: return "granted";
    case event_kind::acquire_timed_out: return "acquire_timed_out";
    case event_kind::acquire_failed: return "acquire_failed";
    case event_kind::write_begin: return "write_begin";
    case event_kind::write_end: return "write_end";
    case event_kind::lost: return "lost";
    case event_kind::released: return "released";
    case event_kind::release_not_owner: return "release_not_owner";
    case event_kind::release_failed: return "release_failed";
  }
  return "unknown";
}

std::string_view to_string(fence_verdict v) noexcept {
  switch (v) {
    case fence_verdict::none: return "none";
    case fence_verdict::accepted: return "accepted";
    case fence_verdict::refused: return "refused";
    case fence_verdict::no_token: return "no_token";
  }
  return "unknown";
}

}  // namespace dlock::compare
