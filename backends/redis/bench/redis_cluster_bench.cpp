// redis+cluster:// against a raw hiredis loop sending the same scripts straight to the master of
// each name's slot (what slot routing costs once the map is known), and min_replicas=1 against
// the plain grant (what WAIT adds). Each thread cycles over 8 names, spread over the masters.
// DLOCK_REDIS_CLUSTER_URI names the nodes (compose/native/dlock-servers up redis-cluster).
//   taskset -c 1 redis_cluster_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dlock/detail/c_handle.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "opened_backends.hpp"
#include "redis_settings.hpp"
#include "scripts.hpp"

namespace {

std::string cluster_uri() {
  const char* v = std::getenv("DLOCK_REDIS_CLUSTER_URI");
  return v ? v : "redis+cluster://127.0.0.1:7000";
}

std::string name_for(int thread, int i) { return "bench:cluster:" + std::to_string(thread * 8 + i % 8); }

using context_ptr = dlock::detail::c_handle<redisContext, redisFree>;

redisReply* ask(redisContext* c, const char* format, const std::string& a) {
  return static_cast<redisReply*>(redisCommand(c, format, a.data(), a.size()));
}

// A raw client's one-time set-up: the master of each name, found by asking the nodes in turn
// which one answers EXISTS for it without MOVED (no slot arithmetic shared with dlock).
struct raw_client {
  std::map<std::string, context_ptr> by_address;
  std::vector<redisContext*> for_name;  // [i % 8]

  raw_client(int thread) {
    const auto u = dlock::uri::parse(cluster_uri());
    for (int i = 0; i < 8; ++i) {
      const auto name = name_for(thread, i);
      redisContext* owner = nullptr;
      for (const auto& h : u.hosts()) {
        auto& c = by_address[h.to_string()];
        if (!c) c.reset(redisConnect(h.host.c_str(), h.port_or(6379)));
        if (!c || c->err) continue;
        auto* r = ask(c.get(), "EXISTS %b", name);
        if (r && r->type == REDIS_REPLY_INTEGER) owner = c.get();
        freeReplyObject(r);
        if (owner) break;
      }
      for_name.push_back(owner);
    }
  }
};

// EVALSHA acquire, [WAIT replicas 100], EVALSHA release (publishing as dlock does on this cluster).
void raw_loop(benchmark::State& state, int replicas) {
  raw_client client(state.thread_index());
  dlock::redis::settings sharded;
  sharded.sharded_pubsub = true;
  const auto& acq = dlock::redis::scripts::simple_acquire;
  const auto& rel = dlock::redis::as_published(sharded, dlock::redis::scripts::simple_release);
  for (auto* c : client.for_name) {
    if (!c) {
      state.SkipWithError("no node answered for a name");
      return;
    }
    freeReplyObject(ask(c, "SCRIPT LOAD %b", acq.source));
    freeReplyObject(ask(c, "SCRIPT LOAD %b", rel.source));
  }
  int i = 0;
  for (auto _ : state) {
    const auto name = name_for(state.thread_index(), i);
    dlock_bench::raw_cycle(state, client.for_name[static_cast<std::size_t>(i++ % 8)], name, acq, rel, replicas);
  }
}
void BM_raw_slot_master(benchmark::State& state) { raw_loop(state, 0); }
void BM_raw_slot_master_wait1(benchmark::State& state) { raw_loop(state, 1); }

void dlock_loop(benchmark::State& state, const std::string& query) {
  dlock_bench::dlock_cycles(state, cluster_uri() + query, name_for);
}
void BM_dlock_cluster(benchmark::State& state) { dlock_loop(state, "?ttl=30s"); }
void BM_dlock_cluster_min_replicas1(benchmark::State& state) { dlock_loop(state, "?ttl=30s&min_replicas=1"); }

}  // namespace

BENCHMARK(BM_raw_slot_master)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_cluster)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_raw_slot_master_wait1)->Threads(1)->UseRealTime();
BENCHMARK(BM_dlock_cluster_min_replicas1)->Threads(1)->UseRealTime();

BENCHMARK_MAIN();
