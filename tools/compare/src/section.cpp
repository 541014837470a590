#include "dlock_compare/section.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace dlock::compare {

instant section::hold_end() const noexcept {
  auto end = release_done.value_or(last_event);
  if (lost && *lost < end) end = *lost;
  return end;
}

namespace {

void set_first(std::optional<instant>& slot, instant at) {
  if (!slot || at < *slot) slot = at;
}

void apply(section& s, const event& e) {
  const auto at = e.at();
  s.last_event = std::max(s.last_event, at);
  if (e.has_token) s.token = e.token;
  switch (e.kind) {
    case event_kind::acquire_started: set_first(s.acquire_started, at); break;
    case event_kind::granted: set_first(s.granted, at); break;
    case event_kind::acquire_timed_out: set_first(s.gave_up, at); break;
    case event_kind::acquire_failed:
      set_first(s.gave_up, at);
      s.acquire_failed = true;
      break;
    case event_kind::write_begin:
      set_first(s.write_begin, at);
      s.verdict = e.verdict;
      s.held_at_begin = e.held != 0;
      break;
    case event_kind::write_end:
      set_first(s.write_end, at);
      s.held_at_end = e.held != 0;
      break;
    case event_kind::lost: set_first(s.lost, at); break;
    case event_kind::released:
      s.release = release_outcome::released;
      set_first(s.release_done, at);
      break;
    case event_kind::release_not_owner:
      s.release = release_outcome::not_owner;
      set_first(s.release_done, at);
      break;
    case event_kind::release_failed:
      s.release = release_outcome::failed;
      set_first(s.release_done, at);
      break;
  }
}

}  // namespace

std::vector<section> assemble_sections(std::span<const event> history) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, section> by_id;
  for (const auto& e : history) {
    auto [it, inserted] = by_id.try_emplace({e.client, e.attempt});
    if (inserted) {
      it->second.client = e.client;
      it->second.attempt = e.attempt;
      it->second.last_event = e.at();
    }
    apply(it->second, e);
  }
  std::vector<section> out;
  out.reserve(by_id.size());
  for (auto& [id, s] : by_id) out.push_back(std::move(s));
  return out;
}

std::vector<std::uint32_t> holders_at_end(std::span<const event> history) {
  std::vector<std::uint32_t> holders;
  for (const auto& s : assemble_sections(history))
    if (s.granted && !s.release_done && !s.lost) holders.push_back(s.client);
  return holders;
}

}  // namespace dlock::compare
