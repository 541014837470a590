// dlock zookeeper:// vs the raw ZooKeeper C client doing the same requests (create ephemeral
// sequential, get_children, pipelined exists-watch, delete), uncontended, in the same run, with the
// server's packet counts per iteration; and dlock's 8-way handoff.
//   taskset -c 1 zookeeper_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// kazoo's handoff on the same server: bench/kazoo_handoff.py (same 8 ways). The same program also
// runs scaling.cpp (scaling/zookeeper/raw and /dlock) and handoff.cpp (the raw handoff floor, and
// contended/zookeeper/dlock: handoff and fairness at 8/32/128 threads on one name).
#include <benchmark/benchmark.h>
#include <zookeeper/zookeeper.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

static std::string server() {
  const char* v = std::getenv("DLOCK_ZOOKEEPER_URI");
  return v ? v : "zookeeper://127.0.0.1:2181/dlock";
}

// Requests per acquire + release, every loop (counted with the server's srvr "Received"/"Sent"
// counters, README): create2 (EPHEMERAL_SEQUENTIAL) + get_children + exists + delete = 4 requests.
// dlock's exists leaves a watch on its own node (deletion = lost lock) and is pipelined (its reply
// not awaited), so 3 round trips of latency; the server also sends one watch notification per
// cycle when the node is deleted. raw_..._watched does exactly that.
// The server's packet counters per iteration: bench_common.hpp (zk_bench::report_packets).
using zk_bench::report_packets;
using zk_bench::server_packets;

static void noop_watcher(zhandle_t*, int, int, const char*, void*) {}

static void raw_loop(benchmark::State& state, bool watch_own_node) {
  const auto u = dlock::uri::parse(server());
  const auto hosts = u.hosts()[0].host + ":" + std::to_string(u.hosts()[0].port_or(2181));
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
  while (zoo_state(zh) != ZOO_CONNECTED_STATE) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string parent = u.path() + "/raw-" + dlock::spi::random_token();
  zoo_create(zh, u.path().c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  // A container parent, as dlock's: the server deletes it once empty (the launcher checks every
  // second), and the next create then answers ZNONODE and makes it again, as dlock does.
  const auto make_parent = [&] {
    zoo_create(zh, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0);
  };
  make_parent();
  const auto before = server_packets();
  for (auto _ : state) {
    char created[512];
    Stat st{};
    const auto path = parent + "/_c_" + dlock::spi::random_token() + "-lock-";
    int rc = zoo_create2(zh, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                         sizeof created, &st);
    if (rc == ZNONODE) {
      make_parent();
      rc = zoo_create2(zh, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                       sizeof created, &st);
    }
    if (rc != ZOK) state.SkipWithError("create failed");
    String_vector v{0, nullptr};
    zoo_get_children(zh, parent.c_str(), 0, &v);
    deallocate_String_vector(&v);
    if (watch_own_node)  // as dlock: the watch is sent, its reply not waited for (the delete follows it)
      zoo_awexists(
          zh, created, &noop_watcher, nullptr, [](int, const Stat*, const void*) {}, nullptr);
    else  // a null watcher function sends watch=false: no watch, no notification after the delete
      zoo_exists(zh, created, 0, &st);
    zoo_delete(zh, created, -1);
  }
  report_packets(state, before);
  zoo_delete(zh, parent.c_str(), -1);
  zookeeper_close(zh);
}

// The same operations as dlock: the exists leaves a watch on our node.
static void raw_zookeeper_acquire_release_watched(benchmark::State& state) { raw_loop(state, true); }
// The loop of the first figures (0.77x): a synchronous exists without a watch (4 round trips, one
// server packet fewer than dlock).
static void raw_zookeeper_acquire_release_unwatched(benchmark::State& state) { raw_loop(state, false); }

static void dlock_acquire_release(benchmark::State& state) {
  auto b = dlock::open(server());
  auto lock = b->make_lock("bench-" + dlock::spi::random_token());
  const auto before = server_packets();
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
  report_packets(state, before);
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

BENCHMARK(raw_zookeeper_acquire_release_watched)->UseRealTime();
BENCHMARK(raw_zookeeper_acquire_release_unwatched)->UseRealTime();
BENCHMARK(dlock_acquire_release)->UseRealTime();
BENCHMARK(dlock_handoff_8way)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
