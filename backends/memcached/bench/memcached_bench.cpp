// dlock memcached:// vs raw libmemcached doing the minimal commands, in the same run. Run:
//   memcached_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// DLOCK_MEMCACHED_URI names the server.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client_pool.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

namespace mc = dlock::memcached;

namespace {

std::string server() {
  const char* v = std::getenv("DLOCK_MEMCACHED_URI");
  return v ? v : "memcached://127.0.0.1:11211";
}

mc::memc_ptr raw_handle() {
  return mc::make_handle(dlock::uri::parse(server()), std::chrono::seconds{2}, std::chrono::seconds{2});
}

// The minimal safe cycle: `add` the grant, then the compare-and-delete memcached allows (it has
// no delete-if-value): `gets` the item's CAS unique, `cas` it with an expiry in the past. Three
// round trips, as many as the unsafe add + get-check + delete.
bool raw_minimal_cycle(memcached_st* m, const mc::key_layout& k) {
  const auto token = dlock::spi::random_token();
  if (memcached_add_by_key(m, k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(), token.size(),
                           31, 0) != MEMCACHED_SUCCESS)
    return false;
  memcached_return_t rc;
  auto it = mc::gets(m, k, k.lock, rc);
  if (!it || it->value != token) return false;
  return memcached_cas_by_key(m, k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(),
                              token.size(), mc::expired_exptime, 0, it->cas) == MEMCACHED_SUCCESS;
}

void raw_libmemcached_minimal(benchmark::State& state) {
  auto m = raw_handle();
  const auto k = mc::keys_for("bench:", "raw-" + dlock::spi::random_token());
  for (auto _ : state)
    if (!raw_minimal_cycle(m.get(), k)) state.SkipWithError("raw cycle failed");
}

// The four commands of dlock's cycle before fencing came from the item's CAS unique: add, incr
// of a fencing counter, gets, cas.
void raw_libmemcached_add_incr_gets_cas(benchmark::State& state) {
  auto m = raw_handle();
  const auto k = mc::keys_for("bench:", "raw4-" + dlock::spi::random_token());
  for (auto _ : state) {
    const auto token = dlock::spi::random_token();
    if (memcached_add_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(),
                             token.size(), 31, 0) != MEMCACHED_SUCCESS) state.SkipWithError("add failed");
    uint64_t v = 0;
    if (memcached_increment_by_key(m.get(), k.group.data(), k.group.size(), k.fence.data(), k.fence.size(), 1, &v) ==
        MEMCACHED_NOTFOUND)
      memcached_add_by_key(m.get(), k.group.data(), k.group.size(), k.fence.data(), k.fence.size(), "0", 1, 0, 0);
    memcached_return_t rc;
    auto it = mc::gets(m.get(), k, k.lock, rc);
    if (!it || it->value != token) {
      state.SkipWithError("gets failed");
      break;
    }
    if (memcached_cas_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(),
                             token.size(), mc::expired_exptime, 0, it->cas) != MEMCACHED_SUCCESS)
      state.SkipWithError("cas failed");
  }
}

void dlock_acquire_release(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  auto lock = b->make_lock("dlock-" + dlock::spi::random_token());
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// The first grant of a name creates its fencing counter from the server's clock: one more
// connection to the name's server for `stats`, and an `add` of the counter (README: Fencing).
void dlock_first_grant_of_a_name(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  for (auto _ : state) {
    auto l = b->make_lock("first-" + dlock::spi::random_token())->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// Scaling convention: one iteration = one uncontended acquire + release, each thread on its own
// name. raw: one libmemcached connection per thread doing the minimal safe cycle; dlock: ONE
// backend shared by every thread (as in a service), a lock object per name.
void scaling_raw(benchmark::State& state) {
  auto m = raw_handle();
  const auto k = mc::keys_for("bench:", "scale-raw-" + dlock::spi::random_token());
  for (auto _ : state)
    if (!raw_minimal_cycle(m.get(), k)) state.SkipWithError("raw cycle failed");
}

void scaling_dlock(benchmark::State& state) {
  static const std::shared_ptr<dlock::backend> shared =
      dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  auto lock = shared->make_lock("scale-dlock-" + dlock::spi::random_token());
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// What holding many leases costs the process: 10,000 leases held (watchdog on) for 10 s, the
// process's CPU time over that time as a percentage of one core (the watchdog's timer and
// renewals). Argument: the ttl in ms (renewal every ttl/3).
void held_leases_cpu(benchmark::State& state) {
  const auto ttl = std::chrono::milliseconds(state.range(0));
  auto b = dlock::open(server() + "?prefix=bench:&ttl=" + std::to_string(ttl.count()) + "ms");
  constexpr int count = 10000;
  const auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const auto run = dlock::spi::random_token().substr(0, 8);
  for (auto _ : state) {
    std::vector<dlock::lease> held;
    held.reserve(count);
    for (int i = 0; i < count; ++i) {
      held.push_back(b->make_lock("held:" + run + ":" + std::to_string(i))->try_acquire());
      if (!held.back()) state.SkipWithError("acquire failed");
    }
    const auto renewals_before = dlock::current_watchdog_load();
    const auto cpu_before = cpu_seconds();
    const auto wall_before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const auto cpu = cpu_seconds() - cpu_before;
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_before;
    const auto renewals_after = dlock::current_watchdog_load();
    state.counters["cpu_percent_of_a_core"] = 100 * cpu / wall.count();
    state.counters["renewals"] = static_cast<double>(renewals_after.renewals - renewals_before.renewals);
    state.counters["renewal_calls"] =
        static_cast<double>(renewals_after.renewal_calls - renewals_before.renewal_calls);
    int lost = 0;
    for (auto& l : held) lost += l.lost_token().stop_requested() ? 1 : 0;
    state.counters["lost"] = lost;
    for (auto& l : held) {
      std::error_code ec;  // a lost lease's release says not_owner
      l.release(ec);
    }
  }
}

}  // namespace

BENCHMARK(raw_libmemcached_minimal)->UseRealTime();
BENCHMARK(raw_libmemcached_add_incr_gets_cas)->UseRealTime();
BENCHMARK(dlock_first_grant_of_a_name)->UseRealTime();
BENCHMARK(dlock_acquire_release)->UseRealTime();
BENCHMARK(scaling_raw)->Name("scaling/memcached/raw")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK(scaling_dlock)->Name("scaling/memcached/dlock")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK(held_leases_cpu)->Arg(3000)->Arg(30000)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
