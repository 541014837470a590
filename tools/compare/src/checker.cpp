#include "dlock_compare/checker.hpp"

#include <algorithm>
#include <set>

namespace dlock::compare {

namespace {

section_id id_of(const section& s) { return {s.client, s.attempt}; }

counts count(std::span<const section> sections) {
  counts c;
  std::set<std::uint32_t> clients;
  for (const auto& s : sections) {
    clients.insert(s.client);
    c.acquires += s.acquire_started.has_value();
    c.grants += s.granted.has_value();
    c.acquire_timeouts += s.gave_up && !s.acquire_failed;
    c.acquire_errors += s.acquire_failed;
    c.writes += s.wrote();
    c.writes_unfinished += s.wrote() && !s.write_end;
    c.writes_without_token += s.wrote() && !s.token;
    c.writes_begun_not_held += s.wrote() && !s.held_at_begin;
    c.writes_ended_not_held += s.write_end && !s.held_at_end;
    c.lost_notifications += s.lost.has_value();
    c.releases += s.release == release_outcome::released;
    c.release_not_owner += s.release == release_outcome::not_owner;
    c.release_errors += s.release == release_outcome::failed;
  }
  c.clients = clients.size();
  return c;
}

// The sections that wrote, in the order their writes began.
std::vector<const section*> writes_in_order(std::span<const section> sections) {
  std::vector<const section*> writes;
  for (const auto& s : sections)
    if (s.wrote()) writes.push_back(&s);
  std::ranges::stable_sort(writes, {}, [](const section* s) { return *s->write_begin; });
  return writes;
}

overlap make_overlap(const section& a, const section& b) {
  // The older holder is the one granted first (a section that wrote was granted; fall back to
  // the write's start for a hand-made history without grants).
  const auto granted = [](const section& s) { return s.granted.value_or(*s.write_begin); };
  const section& older = granted(a) <= granted(b) ? a : b;
  const section& newer = &older == &a ? b : a;
  overlap o;
  o.older = id_of(older);
  o.newer = id_of(newer);
  o.length = std::min(a.write_finish(), b.write_finish()) - std::max(*a.write_begin, *b.write_begin);
  o.notified_before_newer_grant = older.lost && *older.lost < granted(newer);
  o.fenced = a.token && b.token && *a.token != *b.token;
  return o;
}

// (a) Closed intervals [begin, end] intersect when the later one begins before the earlier ends.
std::vector<overlap> find_overlaps(const std::vector<const section*>& writes) {
  std::vector<overlap> found;
  for (std::size_t i = 0; i < writes.size(); ++i)
    for (std::size_t j = i + 1; j < writes.size() && *writes[j]->write_begin <= writes[i]->write_finish(); ++j)
      found.push_back(make_overlap(*writes[i], *writes[j]));
  return found;
}

// (b) Judged in write order, as the resource saw them: stale when smaller than a token seen before.
void count_stale(const std::vector<const section*>& writes, check_result& r) {
  std::optional<std::uint64_t> highest;
  for (const section* s : writes) {
    if (s->verdict == fence_verdict::refused) ++r.writes_refused_by_fenced;
    if (!s->token) continue;
    if (highest && *s->token < *highest) {
      ++r.stale_writes_accepted_by_naive;
      if (s->verdict == fence_verdict::refused) ++r.stale_writes_refused_by_fenced;
    }
    highest = std::max(highest.value_or(0), *s->token);
  }
}

// (d) A sweep over the instants where someone starts or stops waiting or holding.
void measure_unavailability(std::span<const section> sections, check_result& r) {
  struct change {
    instant at;
    int waiting;
    int holding;
  };
  std::vector<change> changes;
  for (const auto& s : sections) {
    if (s.acquire_started) {
      const auto wait_end = s.granted ? *s.granted : s.gave_up.value_or(s.last_event);
      changes.push_back({*s.acquire_started, +1, 0});
      changes.push_back({wait_end, -1, 0});
      if (s.granted) r.longest_wait_for_grant = std::max(r.longest_wait_for_grant, *s.granted - *s.acquire_started);
    }
    if (s.granted) {
      changes.push_back({*s.granted, 0, +1});
      changes.push_back({std::max(*s.granted, s.hold_end()), 0, -1});
    }
  }
  std::ranges::sort(changes, {}, &change::at);
  int waiting = 0, holding = 0;
  bool in_gap = false;
  instant gap_from{};
  for (std::size_t i = 0; i < changes.size();) {
    const auto at = changes[i].at;
    for (; i < changes.size() && changes[i].at == at; ++i) {  // every change at one instant at once
      waiting += changes[i].waiting;
      holding += changes[i].holding;
    }
    const bool unavailable = waiting > 0 && holding == 0;
    if (unavailable && !in_gap) gap_from = at;
    if (!unavailable && in_gap && at - gap_from > r.longest_unavailable) {
      r.longest_unavailable = at - gap_from;
      r.longest_unavailable_from = gap_from;
    }
    in_gap = unavailable;
  }
}

}  // namespace

check_result check(std::span<const section> sections) {
  check_result r;
  r.totals = count(sections);
  const auto writes = writes_in_order(sections);
  r.overlaps = find_overlaps(writes);
  r.unnotified_losses = static_cast<std::uint64_t>(
      std::ranges::count_if(r.overlaps, [](const overlap& o) { return !o.notified_before_newer_grant; }));
  r.unfenced_overlaps =
      static_cast<std::uint64_t>(std::ranges::count_if(r.overlaps, [](const overlap& o) { return !o.fenced; }));
  count_stale(writes, r);
  measure_unavailability(sections, r);
  return r;
}

std::optional<shared_clock::duration> time_to_recover(std::span<const section> sections, instant fault_at) {
  std::optional<instant> first;
  for (const auto& s : sections)
    if (s.granted && *s.granted > fault_at && (!first || *s.granted < *first)) first = s.granted;
  if (!first) return std::nullopt;
  return *first - fault_at;
}

check_result check(std::span<const event> history) {
  const auto sections = assemble_sections(history);
  return check(std::span<const section>(sections));
}

}  // namespace dlock::compare
