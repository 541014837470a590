// dlock memcached:// vs raw libmemcached doing the same commands (add + incr, gets + cas-delete),
// uncontended, in the same run. Run:
//   taskset -c 1 memcached_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "client_pool.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

namespace mc = dlock::memcached;

static std::string server() {
  const char* v = std::getenv("DLOCK_MEMCACHED_URI");
  return v ? v : "memcached://127.0.0.1:11211";
}

static void raw_libmemcached_acquire_release(benchmark::State& state) {
  auto u = dlock::uri::parse(server());
  auto m = mc::make_handle(u, std::chrono::seconds{2}, std::chrono::seconds{2});
  const auto k = mc::keys_for("bench:", "raw-" + dlock::spi::random_token());
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
    if (!it || it->value != token) state.SkipWithError("gets failed");
    if (memcached_cas_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(),
                             token.size(), mc::expired_exptime, 0, it->cas) != MEMCACHED_SUCCESS)
      state.SkipWithError("cas failed");
  }
}

static void dlock_acquire_release(benchmark::State& state) {
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
static void dlock_first_grant_of_a_name(benchmark::State& state) {
  auto b = dlock::open(server() + "?ttl=30s&watchdog=false&prefix=bench:");
  for (auto _ : state) {
    auto l = b->make_lock("first-" + dlock::spi::random_token())->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

BENCHMARK(raw_libmemcached_acquire_release)->UseRealTime();
BENCHMARK(dlock_first_grant_of_a_name)->UseRealTime();
BENCHMARK(dlock_acquire_release)->UseRealTime();
BENCHMARK_MAIN();
