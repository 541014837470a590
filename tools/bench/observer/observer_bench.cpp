// dlock_observer_bench: what an observer (dlock/observer.hpp) costs an uncontended lock, measured as
// acquire+release cycles of one lock object on one thread:
//   compose/native/dlock-servers run redis -- taskset -c 1 build/tools/bench/observer/dlock_observer_bench
//     --benchmark_enable_random_interleaving=true
// - cycles/<target>/none: no observer set (the cost of the check alone);
// - cycles/<target>/counting: an observer whose every function adds one to an atomic counter (the
//   cost of the events themselves: the clock reads, the copies of the observer pointer);
// - cycles/<target>/prometheus: dlock::prometheus filling a registry (the events and the series
//   lookups and updates a service pays).
// Targets: the launcher's redis (DLOCK_TEST_EXCLUDE=redis to leave it out) and memory://, where a
// cycle is cheapest and an observer's share of it the largest. The benchmarks run interleaved, 5
// repetitions each, reported as medians: compare the three of one target with each other.
#include <benchmark/benchmark.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "dlock/dlock.hpp"
#include "dlock/prometheus.hpp"
#include "dlock_test/bench_open.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;

class counting_observer final : public dlock::observer {
 public:
  void on_acquire(const dlock::acquire_event&) noexcept override { ++events_; }
  void on_release(const dlock::release_event&) noexcept override { ++events_; }
  void on_renewal(const dlock::renewal_event&) noexcept override { ++events_; }
  void on_lost(const dlock::loss_event&) noexcept override { ++events_; }
  void on_waiters(const dlock::waiters_event&) noexcept override { ++events_; }
  long events() const { return events_.load(); }

 private:
  std::atomic<long> events_{0};
};

enum class observed { none, counting, prometheus };

void cycles(benchmark::State& state, const std::string& uri, observed how) {
  const auto backend = dlock::testing::open_or_skip(state, uri);
  if (!backend) return;
  auto counting = std::make_shared<counting_observer>();
  if (how == observed::counting) backend->set_observer(counting);
  if (how == observed::prometheus)
    backend->set_observer(dlock::make_prometheus_observer(std::make_shared<prometheus::Registry>()));
  dlock::lock_options options = backend->default_options();
  options.ttl = 30s;
  options.watchdog = false;  // a cycle is the acquire and the release: no renewal thread in the measure
  auto lock = backend->make_lock(dlock::testing::unique_name("observer-bench"), options);
  for (auto _ : state) {
    auto lease = lock->try_acquire_for(10s);
    if (!lease) {
      state.SkipWithError("an uncontended acquire was refused");
      return;
    }
    lease.release();
  }
  state.SetItemsProcessed(state.iterations());
  if (how == observed::counting && counting->events() < state.iterations() * 2)
    state.SkipWithError("the counting observer missed events");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> targets{{"memory", "memory://observer-bench"}};
  const auto excluded = dlock::testing::excluded_names_from_environment();
  for (const auto& target : dlock::testing::joined_targets()) {
    if (target.label != "redis" || dlock::testing::is_excluded(target, excluded)) continue;
    const auto resolved = dlock::testing::resolve(target);
    if (!resolved.uri) {
      std::fprintf(stderr, "%s: %s\n", target.label.c_str(), resolved.error.c_str());
      return 1;  // an unreachable server fails the run unless excluded (DLOCK_TEST_EXCLUDE)
    }
    targets.emplace_back(target.label, *resolved.uri);
  }
  for (const auto& [label, uri] : targets) {
    for (const auto& [name, how] : {std::pair{"none", observed::none}, std::pair{"counting", observed::counting},
                                    std::pair{"prometheus", observed::prometheus}}) {
      benchmark::RegisterBenchmark(("cycles/" + label + "/" + name).c_str(), cycles, uri, how)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
