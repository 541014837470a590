// dlock_async_bench: the asynchronous acquire (dlock/asio.hpp) against the blocking API, on the
// launcher's servers:
//   compose/native/dlock-servers run redis zookeeper postgres -- build/tools/bench/async/dlock_async_bench
// - waiters/<label>: 10,000 async waiters of one name in one process behind a holder, on one
//   io_context thread; each granted waiter releases at once. Counters: the process's most threads
//   (/proc/self/status) and its peak RSS (VmHWM, MB), how many were granted (each exactly once,
//   never two at a time, or the benchmark stops with an error), the median handoff (ms).
// - handoff/<label>/{async,blocking}: 8 waiters of one name taking turns, 200 grants; the
//   iteration time is the median handoff (from a release to the next grant), manual time.
// - uncontended/<label>/{blocking,async,async-release}/<n>: n chains at once, each acquiring and
//   releasing a name of its own (blocking: n threads; async: n operations in flight on one
//   io_context thread, each released there by release(), a round trip on that thread;
//   async-release: released by async_release); items_per_second is acquire+release pairs.
// Targets: redis, zookeeper, postgres_index (the conformance target table; DLOCK_TEST_EXCLUDE).
// Repetitions of 5, reported as medians; compare async with blocking in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <asio/bind_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/bench_open.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A field of /proc/self/status ("Threads", "VmHWM"), as its number.
long status_field(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

dlock::lock_options long_ttl() {
  dlock::lock_options o;
  o.ttl = 30s;
  return o;
}

// The grants of one name, in order: when each came and whether two were ever held at once.
struct turns {
  std::mutex m;
  std::vector<clock_type::time_point> released;
  std::vector<double> handoffs_ms;
  int inside = 0, overlaps = 0, granted = 0;
  void enter() {
    std::lock_guard lock(m);
    if (++inside != 1) ++overlaps;
    ++granted;
    if (!released.empty())
      handoffs_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - released.back()).count());
  }
  void leave() {
    std::lock_guard lock(m);
    --inside;
    released.push_back(clock_type::now());
  }
};

// The engine's round-trip and line threads that the benchmarks run before in this process started
// are not the waiters': they leave after 2 s idle, and the count starts once they have (the timer
// thread, which stays, is counted).
void let_idle_engine_threads_go() {
  const auto give_up = clock_type::now() + 5s;
  while (dlock::detail::async_engine_threads() > 1 && clock_type::now() < give_up) std::this_thread::sleep_for(50ms);
}

void many_waiters(benchmark::State& state, const std::string& uri) {
  auto backend = dlock::testing::open_or_skip(state, uri);
  if (!backend) return;
  const int waiters = static_cast<int>(state.range(0));
  long most_threads = 0;
  double handoff_p50 = 0;
  for (auto _ : state) {
    state.PauseTiming();
    let_idle_engine_threads_go();
    state.ResumeTiming();
    const auto name = dlock::testing::unique_name("async-bench-many");
    auto holder = backend->make_lock(name, long_ttl());
    auto held = holder->try_acquire_for(40s);  // through a server younger than a ttl
    if (!held) {
      state.SkipWithError("the holder was not granted the free name");
      return;
    }
    std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
    locks.reserve(static_cast<std::size_t>(waiters));
    for (int i = 0; i < waiters; ++i) locks.push_back(backend->make_lock(name, long_ttl()));
    asio::io_context io;
    turns t;
    std::vector<int> grants(static_cast<std::size_t>(waiters), 0);
    int failures = 0;
    for (int i = 0; i < waiters; ++i) {
      dlock::async_acquire(*locks[static_cast<std::size_t>(i)], 600s,
                           asio::bind_executor(io, [&, i](std::error_code ec, dlock::lease l) {
                             if (ec || !l) {
                               ++failures;
                               return;
                             }
                             t.enter();
                             ++grants[static_cast<std::size_t>(i)];
                             if (t.granted % 500 == 0) most_threads = std::max(most_threads, status_field("Threads"));
                             t.leave();
                             l.release();
                           }));
    }
    most_threads = std::max(most_threads, status_field("Threads"));
    held.release();  // starts the handoffs: the first is counted from here
    {
      std::lock_guard lock(t.m);
      t.released.push_back(clock_type::now());
    }
    io.run();
    if (failures != 0 || t.overlaps != 0 || std::count(grants.begin(), grants.end(), 1) != waiters) {
      state.SkipWithError(("granted " + std::to_string(t.granted) + " of " + std::to_string(waiters) + ", " +
                           std::to_string(failures) + " failed, " + std::to_string(t.overlaps) + " overlaps")
                              .c_str());
      return;
    }
    handoff_p50 = median(t.handoffs_ms);
  }
  state.counters["threads"] = static_cast<double>(most_threads);
  state.counters["rss_MB"] = static_cast<double>(status_field("VmHWM")) / 1024.0;
  state.counters["handoff_p50_ms"] = handoff_p50;
}

constexpr int handoff_waiters = 8;
constexpr int handoff_grants = 200;

void handoff(benchmark::State& state, const std::string& uri, bool async) {
  auto backend = dlock::testing::open_or_skip(state, uri);
  if (!backend) return;
  for (auto _ : state) {
    const auto name = dlock::testing::unique_name("async-bench-handoff");
    std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
    for (int i = 0; i < handoff_waiters; ++i) locks.push_back(backend->make_lock(name, long_ttl()));
    turns t;
    std::atomic<int> remaining{handoff_grants}, failures{0};
    if (async) {
      asio::io_context io;
      std::function<void(int)> take = [&](int i) {
        dlock::async_acquire(*locks[static_cast<std::size_t>(i)], 60s,
                             asio::bind_executor(io, [&, i](std::error_code ec, dlock::lease l) {
                               if (ec || !l) {
                                 ++failures;
                                 return;
                               }
                               t.enter();
                               t.leave();
                               l.release();
                               if (--remaining > 0) take(i);
                             }));
      };
      for (int i = 0; i < handoff_waiters; ++i) take(i);
      io.run();
    } else {
      std::vector<std::jthread> threads;
      for (int i = 0; i < handoff_waiters; ++i) {
        threads.emplace_back([&, i] {
          while (remaining.load() > 0) {
            auto l = locks[static_cast<std::size_t>(i)]->try_acquire_for(60s);
            if (!l) {
              ++failures;
              return;
            }
            t.enter();
            t.leave();
            l.release();
            --remaining;
          }
        });
      }
    }
    if (failures.load() != 0 || t.overlaps != 0) {
      state.SkipWithError("a waiter failed or two held the lock at once");
      return;
    }
    state.SetIterationTime(median(t.handoffs_ms) / 1000.0);
  }
}

constexpr int uncontended_pairs = 2000;

// How the uncontended chains take and give back their names.
enum class chain_kind {
  blocking,       // try_acquire_for and release on n threads
  async,          // async_acquire; release() on the io_context's thread, a round trip there
  async_release,  // async_acquire and async_release: no round trip on the io_context's thread
};

void uncontended(benchmark::State& state, const std::string& uri, chain_kind kind) {
  auto backend = dlock::testing::open_or_skip(state, uri);
  if (!backend) return;
  const int chains = static_cast<int>(state.range(0));
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < chains; ++i)
    locks.push_back(backend->make_lock(dlock::testing::unique_name("async-bench-free"), long_ttl()));
  for (auto& l : locks) {
    if (!l->try_acquire_for(40s)) {  // through a server younger than a ttl
      state.SkipWithError("a free name was not granted");
      return;
    }
  }
  std::atomic<int> failures{0};
  for (auto _ : state) {
    std::atomic<int> remaining{uncontended_pairs};
    if (kind != chain_kind::blocking) {
      asio::io_context io;
      std::function<void(int)> take = [&](int i) {
        dlock::async_acquire(*locks[static_cast<std::size_t>(i)], 10s,
                             asio::bind_executor(io, [&, i](std::error_code ec, dlock::lease l) {
                               if (ec || !l) {
                                 ++failures;
                                 return;
                               }
                               if (kind == chain_kind::async) {
                                 l.release();
                                 if (--remaining >= chains) take(i);
                                 return;
                               }
                               dlock::async_release(std::move(l),
                                                    asio::bind_executor(io, [&, i](std::error_code released) {
                                                      if (released) ++failures;
                                                      if (--remaining >= chains) take(i);
                                                    }));
                             }));
      };
      for (int i = 0; i < chains; ++i) take(i);
      io.run();
    } else {
      std::vector<std::jthread> threads;
      for (int i = 0; i < chains; ++i) {
        threads.emplace_back([&, i] {
          while (remaining.fetch_sub(1) > 0) {
            auto l = locks[static_cast<std::size_t>(i)]->try_acquire_for(10s);
            if (!l) {
              ++failures;
              return;
            }
            l.release();
          }
        });
      }
    }
  }
  if (failures.load() != 0) state.SkipWithError("an uncontended acquire failed");
  state.SetItemsProcessed(state.iterations() * uncontended_pairs);
}

}  // namespace

int main(int argc, char** argv) {
  const auto excluded = dlock::testing::excluded_names_from_environment();
  for (const auto& target : dlock::testing::joined_targets()) {
    if (target.label != "redis" && target.label != "zookeeper" && target.label != "postgres_index") continue;
    if (dlock::testing::is_excluded(target, excluded)) continue;
    const auto resolved = dlock::testing::resolve(target);
    if (!resolved.uri) {
      std::fprintf(stderr, "%s: %s\n", target.label.c_str(), resolved.error.c_str());
      return 1;  // an unreachable server fails the run unless excluded (DLOCK_TEST_EXCLUDE)
    }
    const auto& uri = *resolved.uri;
    benchmark::RegisterBenchmark(("waiters/" + target.label).c_str(), many_waiters, uri)
        ->Arg(10000)
        ->Iterations(1)
        ->Unit(benchmark::kSecond);
    for (const bool async : {true, false}) {
      const std::string how = async ? "async" : "blocking";
      benchmark::RegisterBenchmark(("handoff/" + target.label + "/" + how).c_str(), handoff, uri, async)
          ->UseManualTime()
          ->Iterations(1)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true)
          ->Unit(benchmark::kMillisecond);
    }
    for (const auto& [how, kind] : {std::pair{"blocking", chain_kind::blocking}, std::pair{"async", chain_kind::async},
                                    std::pair{"async-release", chain_kind::async_release}}) {
      benchmark::RegisterBenchmark(("uncontended/" + target.label + "/" + how).c_str(), uncontended, uri, kind)
          ->Arg(1)
          ->Arg(64)
          ->Iterations(1)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
