// The scaling convention: one uncontended acquire+release per iteration, each thread on
// names of its own, at 1/8/32/128 threads.
//   scaling/zookeeper/raw: the raw C client, one session per thread, the minimal requests of the
//     recipe: create ephemeral sequential, get_children (first? yes), delete.
//   scaling/zookeeper/dlock: ONE dlock backend (one session) shared by every thread, as in a
//     service, a lock object per name: the same three requests plus the pipelined exists-watch on
//     the held node (a deletion from outside is a lost lock; its reply is not waited for).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "bench_common.hpp"
#include "dlock/spi.hpp"

namespace {

// The recipe's minimal requests, once per iteration, in session `zh`: create under a parent of its
// own ("<root>/<folder>-<token>"), get_children, delete.
void raw_cycles(benchmark::State& state, zhandle_t* zh, const std::string& folder) {
  const std::string parent = zk_bench::raw_root() + "/" + folder + "-" + dlock::spi::random_token();
  zoo_create(zh, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  const std::string prefix = parent + "/_c_" + dlock::spi::random_token() + "-lock-";
  for (auto _ : state) {
    char created[512];
    if (zoo_create(zh, prefix.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                   sizeof created) != ZOK) {
      state.SkipWithError("create failed");
      break;
    }
    String_vector children{0, nullptr};
    zoo_get_children(zh, parent.c_str(), 0, &children);
    deallocate_String_vector(&children);
    zoo_delete(zh, created, -1);
  }
  zoo_delete(zh, parent.c_str(), -1);
}

void scaling_raw(benchmark::State& state) {
  zhandle_t* zh = zk_bench::raw_connect();
  if (!zh) {
    state.SkipWithError("no session");
    return;
  }
  raw_cycles(state, zh, "scaling-raw");
  zookeeper_close(zh);
}

// Not part of the convention: the raw loop with ONE session shared by all threads, as dlock's
// backend shares its session. Separates what one session costs from what dlock adds.
void raw_one_session(benchmark::State& state) {
  static zhandle_t* const shared = zk_bench::raw_connect();
  if (!shared) {
    state.SkipWithError("no session");
    return;
  }
  raw_cycles(state, shared, "scaling-raw1");
}

void scaling_dlock(benchmark::State& state) {
  static const std::shared_ptr<dlock::backend> shared = dlock::open(zk_bench::server_uri());
  auto lock = shared->make_lock("scaling-" + dlock::spi::random_token());
  zk_bench::acquire_and_release(
      state, [&] { return lock->try_acquire(); }, "try_acquire failed");
}

}  // namespace

BENCHMARK(scaling_raw)->Name("scaling/zookeeper/raw")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK(scaling_dlock)
    ->Name("scaling/zookeeper/dlock")
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->Threads(128)
    ->UseRealTime();
BENCHMARK(raw_one_session)
    ->Name("raw_one_session/zookeeper")
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->Threads(128)
    ->UseRealTime();
