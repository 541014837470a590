#pragma once
// memcached's whole-second expiries and its delayed restart, with no client library: the lock code
// and the compare declarations (compare/families.cpp) both read them.
#include <algorithm>
#include <chrono>
#include <ctime>

namespace dlock::memcached {

// Whole seconds for memcached: ceil(ttl) + 1. The +1 absorbs memcached's one-second clock, which
// may expire an item up to one second early; never 0 (0 means "never expires").
inline time_t exptime_for(std::chrono::milliseconds ttl) noexcept {
  const auto secs = std::chrono::ceil<std::chrono::seconds>(ttl).count();
  return static_cast<time_t>((secs < 1 ? 1 : secs) + 1);
}

// antirez's "delayed restart": the reported uptime below which a server grants nothing to a lock
// of this ttl. A server that restarted lost every grant; before it grants again, every holder from
// before the restart must have passed its local validity deadline (ttl after its acquire began,
// which was before the restart), so its lost signal fired first: the server must be really older
// than exptime_for(ttl) > ttl. It must also be at least 5 s old, so that its `time` (which lags or
// leads the real clock by up to 3 s) is above every second the previous process stamped a fencing
// token with. memcached reports uptime 2 s more than it really is (process_started is back-dated)
// and its clock ticks once a second: 3 s more in all.
inline std::chrono::seconds min_uptime_to_grant(std::chrono::milliseconds ttl) noexcept {
  constexpr std::chrono::seconds clock_settled{5};
  constexpr std::chrono::seconds reported_over_real{3};
  return std::max(std::chrono::seconds(exptime_for(ttl)), clock_settled) + reported_over_real;
}

}  // namespace dlock::memcached
