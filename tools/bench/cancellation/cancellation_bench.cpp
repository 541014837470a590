// dlock_cancellation_bench: how soon a stop request ends a waiting acquire, on every conformance
// target (each backend on the launcher's servers):
//   compose/native/dlock-servers run -- build/tools/bench/cancellation/dlock_cancellation_bench
// One benchmark per target, cancel/<label>: a holder keeps the name (ttl 20 s); a waiter thread
// waits for it with try_acquire_for(30 s, stop); once it has waited `settle` (into its wait on
// the server: a queue node, a waiting statement, a channel), the stop is requested, and the time
// from the request to the waiter's return is the iteration's time (manual time). Each waiter must
// end with operation_canceled and no lease: anything else stops the benchmark with an error.
// Repetitions of 20 stops, reported as their median (the target: under 50 ms on every backend);
// max_ms is the slowest stop of a repetition. The waiter thread is started per stop, outside the
// timed part.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>

#include "dlock/dlock.hpp"
#include "dlock_test/bench_open.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr auto settle = 50ms;  // from starting the waiter to the stop request

void cancel_a_wait(benchmark::State& state, const std::string& uri) {
  const auto backend = dlock::testing::open_or_skip(state, uri);
  if (!backend) return;
  dlock::lock_options options;
  options.ttl = 20s;
  const auto name = dlock::testing::unique_name("cancel-bench");
  auto holder = backend->make_lock(name, options), waiter = backend->make_lock(name, options);
  // Through a server younger than a ttl (a fresh Redis grants nothing for one).
  auto held = holder->try_acquire_for(options.ttl + 5s);
  if (!held) {
    state.SkipWithError("the holder was not granted the free name");
    return;
  }
  double slowest = 0;
  for (auto _ : state) {
    std::stop_source stop;
    auto waiting = std::async(std::launch::async, [&] {
      std::error_code ec;
      auto got = waiter->try_acquire_for(30s, stop.get_token(), ec);
      return std::pair{std::move(got), ec};
    });
    std::this_thread::sleep_for(settle);
    const auto asked = clock_type::now();
    stop.request_stop();
    waiting.wait();
    const std::chrono::duration<double> took = clock_type::now() - asked;
    state.SetIterationTime(took.count());
    slowest = std::max(slowest, took.count() * 1000);
    auto [got, ec] = waiting.get();
    if (got || ec != std::make_error_code(std::errc::operation_canceled)) {
      state.SkipWithError(("the stopped wait ended with " + (got ? std::string("a lease") : ec.message())).c_str());
      break;
    }
  }
  state.counters["max_ms"] = slowest;
}

}  // namespace

int main(int argc, char** argv) {
  const auto excluded = dlock::testing::excluded_names_from_environment();
  for (const auto& target : dlock::testing::joined_targets()) {
    if (dlock::testing::is_excluded(target, excluded)) continue;
    const auto resolved = dlock::testing::resolve(target);
    if (!resolved.uri) {
      std::fprintf(stderr, "cancel/%s: %s\n", target.label.c_str(), resolved.error.c_str());
      return 1;  // an unreachable server fails the run unless excluded (DLOCK_TEST_EXCLUDE)
    }
    benchmark::RegisterBenchmark(("cancel/" + target.label).c_str(), cancel_a_wait, *resolved.uri)
        ->UseManualTime()
        ->Iterations(20)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
