#include "dlock/capabilities.hpp"

#include "dlock/error.hpp"

namespace dlock {

std::string_view to_string(capability c) noexcept {
  switch (c) {
    case capability::reentrant: return "reentrant";
    case capability::fair: return "fair";
    case capability::blocking: return "blocking";
    case capability::expiring: return "expiring";
    case capability::renewable: return "renewable";
    case capability::fencing: return "fencing";
    case capability::lost_notification: return "lost_notification";
    case capability::read_write: return "read_write";
    case capability::semaphore: return "semaphore";
    case capability::writer_preferred: return "writer_preferred";
    case capability::atomic_set: return "atomic_set";
  }
  return "?";
}

std::string_view to_string(lock_scope s) noexcept {
  switch (s) {
    case lock_scope::process: return "process";
    case lock_scope::host: return "host";
    case lock_scope::network: return "network";
  }
  return "?";
}

std::string capabilities::to_string() const {
  std::string out;
  for (capability c : all_capabilities) {
    if (!has(c)) continue;
    if (!out.empty()) out += '|';
    out += dlock::to_string(c);
  }
  return out.empty() ? "none" : out;
}

capabilities capabilities::parse(std::string_view text) {
  capabilities result;
  if (text == "none" || text.empty()) return result;
  while (!text.empty()) {
    const auto end = text.find_first_of("|,");
    const auto word = text.substr(0, end);
    bool known = false;
    for (capability c : all_capabilities) {
      if (dlock::to_string(c) == word) {
        result = result.with(c);
        known = true;
      }
    }
    if (!known) {
      std::string accepted;
      for (capability c : all_capabilities)
        accepted += std::string(accepted.empty() ? "" : ", ") + std::string(dlock::to_string(c));
      throw error(errc::invalid_argument,
                  "unknown capability '" + std::string(word) + "'; expected one of " + accepted);
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return result;
}

}  // namespace dlock
