#include <cstdio>
#include <string>

#include "dlock_compare/checker.hpp"

namespace dlock::compare {

namespace {

std::string milliseconds(shared_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1e6);
  return buf;
}

std::string section_json(const section_id& s) {
  return "{\"client\": " + std::to_string(s.client) + ", \"attempt\": " + std::to_string(s.attempt) + "}";
}

std::string counts_json(const counts& c) {
  return "{\"clients\": " + std::to_string(c.clients) + ", \"acquires\": " + std::to_string(c.acquires) +
         ", \"grants\": " + std::to_string(c.grants) + ", \"acquire_timeouts\": " + std::to_string(c.acquire_timeouts) +
         ", \"acquire_errors\": " + std::to_string(c.acquire_errors) + ", \"writes\": " + std::to_string(c.writes) +
         ", \"writes_unfinished\": " + std::to_string(c.writes_unfinished) +
         ", \"writes_without_token\": " + std::to_string(c.writes_without_token) +
         ", \"writes_begun_not_held\": " + std::to_string(c.writes_begun_not_held) +
         ", \"writes_ended_not_held\": " + std::to_string(c.writes_ended_not_held) +
         ", \"lost_notifications\": " + std::to_string(c.lost_notifications) +
         ", \"releases\": " + std::to_string(c.releases) +
         ", \"release_not_owner\": " + std::to_string(c.release_not_owner) +
         ", \"release_errors\": " + std::to_string(c.release_errors) + "}";
}

std::string overlaps_json(const std::vector<overlap>& overlaps, std::size_t max_listed) {
  std::string out = "[";
  for (std::size_t i = 0; i < overlaps.size() && i < max_listed; ++i) {
    const auto& o = overlaps[i];
    if (i > 0) out += ", ";
    out += "{\"older\": " + section_json(o.older) + ", \"newer\": " + section_json(o.newer) +
           ", \"length_ms\": " + milliseconds(o.length) +
           ", \"notified_before_newer_grant\": " + (o.notified_before_newer_grant ? "true" : "false") +
           ", \"fenced\": " + (o.fenced ? "true" : "false") + "}";
  }
  return out + "]";
}

}  // namespace

std::string to_json(const check_result& r, std::size_t max_overlaps_listed) {
  const auto from = r.longest_unavailable_from ? std::to_string(r.longest_unavailable_from->time_since_epoch().count())
                                               : std::string("null");
  return "{\"counts\": " + counts_json(r.totals) + ", \"overlaps\": " + std::to_string(r.overlap_count()) +
         ", \"overlaps_listed\": " + overlaps_json(r.overlaps, max_overlaps_listed) +
         ", \"stale_writes_accepted_by_naive\": " + std::to_string(r.stale_writes_accepted_by_naive) +
         ", \"stale_writes_refused_by_fenced\": " + std::to_string(r.stale_writes_refused_by_fenced) +
         ", \"writes_refused_by_fenced\": " + std::to_string(r.writes_refused_by_fenced) +
         ", \"unnotified_losses\": " + std::to_string(r.unnotified_losses) +
         ", \"unfenced_overlaps\": " + std::to_string(r.unfenced_overlaps) +
         ", \"longest_unavailable_ms\": " + milliseconds(r.longest_unavailable) +
         ", \"longest_unavailable_from_ns\": " + from +
         ", \"longest_wait_for_grant_ms\": " + milliseconds(r.longest_wait_for_grant) + "}";
}

}  // namespace dlock::compare
