#pragma once
// A script call as the redis locks and leases keep it (its keys and arguments owned, so a lease
// keeps its release and renewal, and a background clean-up its undo), and how durations and
// clocks are written as script arguments.
#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "connection.hpp"

namespace dlock::redis {

// One script call: the script, its keys and its arguments.
struct script_call {
  const script* s = nullptr;
  std::vector<std::string> keys, args;
  std::vector<std::string_view> key_views() const { return {keys.begin(), keys.end()}; }
  std::vector<std::string_view> arg_views() const { return {args.begin(), args.end()}; }
};

// A duration as a script argument: whole milliseconds, at least 1 (PX and PEXPIRE refuse 0).
inline std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(std::max<std::chrono::milliseconds::rep>(d.count(), 1));
}

// Redisson passes the client's wall clock as "now" to its fair-lock scripts; so do we.
inline std::string now_ms() {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace dlock::redis
