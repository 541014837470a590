#pragma once
// What holding many leases costs the process, for the backends' held-leases benchmarks (redis,
// memcached, postgres, mysql): 10,000 leases held with the watchdog on
// for 10 s, the process's CPU time over that time as a percentage of one core (the watchdog's
// timer and renewals, the pool, the client library). The backend's ttl sets the renewal period
// (ttl/3).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::testing {

inline double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// `b` was opened with the ttl under test and the watchdog on; `prefix` keeps the names apart from
// other runs'.
inline void held_leases_cpu(benchmark::State& state, dlock::backend& b, const std::string& prefix) {
  constexpr int count = 10000;
  for (auto _ : state) {
    std::vector<dlock::lease> held;
    held.reserve(count);
    for (int i = 0; i < count; ++i) {
      held.push_back(b.make_lock(prefix + std::to_string(i))->try_acquire());
      if (!held.back()) {
        state.SkipWithError("acquire failed");
        return;
      }
    }
    const auto renewals_before = dlock::current_watchdog_load();
    const auto cpu_before = process_cpu_seconds();
    const auto wall_before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const auto cpu = process_cpu_seconds() - cpu_before;
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_before;
    const auto renewals_after = dlock::current_watchdog_load();
    state.counters["cpu_percent_of_a_core"] = 100 * cpu / wall.count();
    state.counters["renewals"] = static_cast<double>(renewals_after.renewals - renewals_before.renewals);
    state.counters["renewal_calls"] = static_cast<double>(renewals_after.renewal_calls - renewals_before.renewal_calls);
    int lost = 0;
    for (auto& l : held) lost += l.lost_token().stop_requested() ? 1 : 0;
    state.counters["lost"] = lost;
    for (auto& l : held) {
      std::error_code ec;  // a lease the watchdog could not keep is not_owner here: counted above
      l.release(ec);
    }
  }
}

}  // namespace dlock::testing
