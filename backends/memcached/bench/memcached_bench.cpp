// dlock memcached:// vs raw libmemcached doing the minimal commands, in the same run. Run:
//   memcached_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// DLOCK_MEMCACHED_URI names the server.
#include <benchmark/benchmark.h>

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
#include "dlock_test/held_leases_cpu.hpp"

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
                             token.size(), 31, 0) != MEMCACHED_SUCCESS)
      state.SkipWithError("add failed");
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

// One dlock cycle: the lease a try-acquire returned (none stops the benchmark), then its release.
void dlock_cycle(benchmark::State& state, dlock::lease l) {
  if (!l) state.SkipWithError("try_acquire failed");
  l.release();
}

void dlock_acquire_release(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  auto lock = b->make_lock("dlock-" + dlock::spi::random_token());
  for (auto _ : state) dlock_cycle(state, lock->try_acquire());
}

// The first grant of a name creates its fencing counter from the server's clock: one more
// connection to the name's server for `stats`, and an `add` of the counter (README: Fencing).
void dlock_first_grant_of_a_name(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  for (auto _ : state) dlock_cycle(state, b->make_lock("first-" + dlock::spi::random_token())->try_acquire());
}

// The semaphore: raw libmemcached taking one permit slot with `add` and giving it back with a
// plain `delete` (two round trips, no owner check), against dlock's semaphore of 4 taking one
// permit (`add` of a free slot, one `gets` of the slot and the fencing base, the CAS-guarded
// release: three round trips).
void raw_semaphore_add_delete(benchmark::State& state) {
  auto m = raw_handle();
  const auto k = mc::keys_for("bench:", "raw-sem-" + dlock::spi::random_token());
  for (auto _ : state) {
    const auto token = dlock::spi::random_token();
    if (memcached_add_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(),
                             token.size(), 31, 0) != MEMCACHED_SUCCESS)
      state.SkipWithError("add failed");
    if (memcached_delete_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0) !=
        MEMCACHED_SUCCESS)
      state.SkipWithError("delete failed");
  }
}

void dlock_semaphore_acquire_release(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  auto sem = b->make_semaphore("sem-" + dlock::spi::random_token(), 4);
  for (auto _ : state) dlock_cycle(state, sem->try_acquire());
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
  static const std::shared_ptr<dlock::backend> shared = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  auto lock = shared->make_lock("scale-dlock-" + dlock::spi::random_token());
  for (auto _ : state) dlock_cycle(state, lock->try_acquire());
}

// What holding many leases costs the process (dlock_test/held_leases_cpu.hpp): the watchdog's timer
// and its batched renewals. Argument: the ttl in ms (renewal every ttl/3).
void held_leases_cpu(benchmark::State& state) {
  auto b = dlock::open(server() + "?prefix=bench:&ttl=" + std::to_string(state.range(0)) + "ms");
  dlock::testing::held_leases_cpu(state, *b, "held:" + dlock::spi::random_token().substr(0, 8) + ":");
}

}  // namespace

BENCHMARK(raw_libmemcached_minimal)->UseRealTime();
BENCHMARK(raw_libmemcached_add_incr_gets_cas)->UseRealTime();
BENCHMARK(dlock_first_grant_of_a_name)->UseRealTime();
BENCHMARK(dlock_acquire_release)->UseRealTime();
BENCHMARK(raw_semaphore_add_delete)->UseRealTime();
BENCHMARK(dlock_semaphore_acquire_release)->UseRealTime();
BENCHMARK(scaling_raw)->Name("scaling/memcached/raw")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK(scaling_dlock)
    ->Name("scaling/memcached/dlock")
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->Threads(128)
    ->UseRealTime();
BENCHMARK(held_leases_cpu)->Arg(3000)->Arg(30000)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
