#pragma once
// The price of a backend in speed: client threads doing blocking acquire+release cycles, thread i
// on name i % names, for a fixed time. Counts cycles per second, the latency of one cycle, and,
// when several threads share a name, the handoff: from a release (a steady_clock stamp written
// just before it) to the grant of the next holder of that name whose acquire had started before
// that release (it really waited for it). `dlock bench` and the speed columns of `dlock compare`
// both measure with it.
//
// Threads, not processes: the histograms are merged in memory and the handoff is timed on one
// clock with no history file in the way. Each client opens its own backend object (its own
// connection), as separate services would, unless the run gives one to share (dlock bench does:
// the threads of one service).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/latency_histogram.hpp"

namespace dlock {
class backend;
}

namespace dlock::compare {

struct speed_run {
  std::string uri;
  std::string name_prefix;  // names are name_prefix + "0", "1", ...: unique to the run
  std::uint32_t clients = 1;
  std::uint32_t names = 1;  // client i locks name i % names; names < clients means contention
  std::chrono::milliseconds duration{std::chrono::seconds(1)};
  std::shared_ptr<backend> shared_backend;  // set: every client uses it; empty: each opens `uri`
  // How long one acquire may wait before the client gives up (counted as an error and the client
  // stops): a lock that never comes back must not hang the run. nullopt: acquire() waits forever.
  std::optional<std::chrono::milliseconds> acquire_timeout = std::chrono::seconds(10);
  // false: an acquire that times out is counted (timeouts) and the client tries again, as a
  // service with a deadline on each attempt does (dlock bench --wait).
  bool timeout_stops_the_client = true;
};

struct speed_measurement {
  std::uint32_t clients = 0;
  std::uint32_t names = 0;
  double seconds = 0;          // from the common start to the last client's stop
  latency_histogram cycles;    // one acquire+release each
  latency_histogram handoffs;  // release -> next waiting holder's grant (names < clients)
  // Each client's completed cycles, in client order: how evenly the grants went round. On one
  // contended name a starved waiter shows as a client far below the fair share.
  std::vector<std::uint64_t> cycles_per_client;
  std::uint64_t errors = 0;  // clients stopped by an error (opening, acquire, release)
  std::string first_error;   // its message, as the backend gave it (redact before printing)
  // Each acquire's outcome, as the backend's observer counts them (dlock_acquire_duration_seconds's
  // outcome label): granted, timed out (acquire_timeout), failed (threw).
  std::uint64_t grants = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t failed_acquires = 0;
  std::uint64_t acquires() const noexcept { return grants + timeouts + failed_acquires; }

  double cycles_per_second() const noexcept {
    return seconds > 0 ? static_cast<double>(cycles.count()) / seconds : 0.0;
  }
  // The fewest and the most cycles one client made, as a fraction of the fair share (all cycles
  // over the clients): 1.0 each when every client got its turn equally; the issue's bar for "no
  // starvation" is that nobody falls below 0.5 (2x the fair share's wait). 0 when nothing ran.
  double lowest_share() const;
  double highest_share() const;
};

// Opens the clients' backends (outside the measured time), starts them together, stops them after
// `duration`, merges. Errors are counted, never thrown; the caller decides what they mean.
speed_measurement measure_speed(const speed_run& run);

// The three points of a `dlock compare` speed row: uncontended at 1 and at 8 clients (each on a
// name of its own), and contended, 8 clients on one name (the handoff).
inline constexpr std::uint32_t speed_clients = 8;
struct backend_speed {
  std::optional<speed_measurement> one_client;
  std::optional<speed_measurement> many_clients;  // speed_clients, a name each
  std::optional<speed_measurement> contended;     // speed_clients, one name
};
backend_speed measure_backend_speed(const std::string& uri, const std::string& name_prefix,
                                    std::chrono::milliseconds duration_per_point);
// How long measure_backend_speed takes, roughly (for the progress line's estimate).
std::chrono::milliseconds backend_speed_length(std::chrono::milliseconds duration_per_point);

// Where the client threads run: the CPUs this process may use (sched_getaffinity) of those online,
// e.g. "client threads on CPUs 0-1 of 2 online, not pinned; servers on the same host".
std::string cpu_placement();

}  // namespace dlock::compare
