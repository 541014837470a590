// dlock zookeeper:// vs the raw ZooKeeper C client doing the same requests (create ephemeral
// sequential, get_children, delete), uncontended, in the same run; and dlock's 8-way handoff.
//   taskset -c 1 zookeeper_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// kazoo's handoff on the same server: bench/kazoo_handoff.py (same 8 ways).
#include <benchmark/benchmark.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

static std::string server() {
  const char* v = std::getenv("DLOCK_ZOOKEEPER_URI");
  return v ? v : "zookeeper://127.0.0.1:2181/dlock";
}

static void raw_zookeeper_acquire_release(benchmark::State& state) {
  const auto u = dlock::uri::parse(server());
  const auto hosts = u.hosts()[0].host + ":" + std::to_string(u.hosts()[0].port_or(2181));
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
  while (zoo_state(zh) != ZOO_CONNECTED_STATE) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string parent = u.path() + "/raw-" + dlock::spi::random_token();
  zoo_create(zh, u.path().c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  zoo_create(zh, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  for (auto _ : state) {
    char created[512];
    Stat st{};
    const auto path = parent + "/_c_" + dlock::spi::random_token() + "-lock-";
    if (zoo_create2(zh, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created, &st) != ZOK)
      state.SkipWithError("create failed");
    String_vector v{0, nullptr};
    zoo_get_children(zh, parent.c_str(), 0, &v);
    deallocate_String_vector(&v);
    zoo_wexists(zh, created, nullptr, nullptr, &st);  // dlock watches its own node once granted
    zoo_delete(zh, created, -1);
  }
  zoo_delete(zh, parent.c_str(), -1);
  zookeeper_close(zh);
}

static void dlock_acquire_release(benchmark::State& state) {
  auto b = dlock::open(server());
  auto lock = b->make_lock("bench-" + dlock::spi::random_token());
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// 8 lock objects (one session) on one name, each acquiring/releasing in turn: time per handoff.
static void dlock_handoff_8way(benchmark::State& state) {
  auto b = dlock::open(server());
  const auto name = "handoff-" + dlock::spi::random_token();
  for (auto _ : state) {
    constexpr int ways = 8, rounds = 5;
    std::vector<std::thread> ts;
    for (int i = 0; i < ways; ++i)
      ts.emplace_back([&] {
        auto lock = b->make_lock(name);
        for (int r = 0; r < rounds; ++r) lock->acquire().release();
      });
    for (auto& t : ts) t.join();
    state.SetItemsProcessed(state.items_processed() + ways * rounds);
  }
}

BENCHMARK(raw_zookeeper_acquire_release)->UseRealTime();
BENCHMARK(dlock_acquire_release)->UseRealTime();
BENCHMARK(dlock_handoff_8way)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
