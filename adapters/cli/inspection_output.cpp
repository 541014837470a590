#include "inspection_output.hpp"

#include <ctime>

namespace dlock::cli {
namespace {

std::string utc_text(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string kind_text(const lock_holder& h) {
  std::string kind(to_string(h.kind));
  if (h.kind == hold_kind::permits) kind += "(" + std::to_string(h.count) + ")";
  return kind;
}

}  // namespace

std::string holder_json(const lock_holder& h) {
  std::string out = "{\"owner\":" + json_string(h.owner) + ",\"kind\":" + json_string(to_string(h.kind));
  if (h.kind == hold_kind::permits) out += ",\"count\":" + std::to_string(h.count);
  if (h.since) out += ",\"since\":" + json_string(utc_text(*h.since));
  if (h.ttl_left) out += ",\"ttl_left_ms\":" + std::to_string(h.ttl_left->count());
  if (h.fencing_token) out += ",\"fencing_token\":" + std::to_string(*h.fencing_token);
  return out + "}";
}

std::string waiter_json(const lock_waiter& w) {
  std::string out = "{\"owner\":" + json_string(w.owner);
  if (w.kind) out += ",\"kind\":" + json_string(to_string(*w.kind));
  return out + "}";
}

std::string holder_line(const lock_holder& h) {
  std::string out = "owner=" + (h.owner.empty() ? std::string("?") : h.owner) + " kind=" + kind_text(h);
  if (h.fencing_token) out += " token=" + std::to_string(*h.fencing_token);
  if (h.ttl_left) out += " ttl-left=" + std::to_string(h.ttl_left->count()) + "ms";
  if (h.since) out += " since=" + utc_text(*h.since);
  return out;
}

std::string waiter_line(const lock_waiter& w) {
  std::string out = "owner=" + (w.owner.empty() ? std::string("?") : w.owner);
  if (w.kind) out += " kind=" + std::string(to_string(*w.kind));
  return out;
}

}  // namespace dlock::cli
