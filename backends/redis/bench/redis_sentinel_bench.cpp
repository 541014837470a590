// redis+sentinel:// against a raw hiredis loop sending the same scripts to the master the
// sentinels name (what the Sentinel layer costs once connected), and min_replicas=1 against
// the plain grant (what WAIT adds). DLOCK_REDIS_SENTINEL_URI names the sentinels
// (compose/native/dlock-servers up redis-sentinel).
//   taskset -c 1 redis_sentinel_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "opened_backends.hpp"
#include "scripts.hpp"

namespace {

std::string sentinel_uri() {
  const char* v = std::getenv("DLOCK_REDIS_SENTINEL_URI");
  return v ? v : "redis+sentinel://127.0.0.1:26379/mymaster";
}

std::string name_for(int thread, int i) { return "bench:sentinel:" + std::to_string(thread * 8 + i % 8); }

// The master the first answering sentinel names, connected.
redisContext* connect_master() {
  const auto u = dlock::uri::parse(sentinel_uri());
  const auto set = u.path().substr(1);
  for (const auto& h : u.hosts()) {
    redisContext* s = redisConnect(h.host.c_str(), h.port_or(26379));
    if (!s || s->err) {
      if (s) redisFree(s);
      continue;
    }
    auto* r = static_cast<redisReply*>(redisCommand(s, "SENTINEL get-master-addr-by-name %s", set.c_str()));
    redisContext* m = nullptr;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
      m = redisConnect(r->element[0]->str, std::atoi(r->element[1]->str));
    freeReplyObject(r);
    redisFree(s);
    if (m) return m;
  }
  return nullptr;
}

// One hiredis connection per thread: EVALSHA acquire, [WAIT replicas 100], EVALSHA release.
void raw_loop(benchmark::State& state, int replicas) {
  redisContext* c = connect_master();
  if (!c || c->err) {
    state.SkipWithError("no master named by the sentinels");
    return;
  }
  const auto& acq = dlock::redis::scripts::simple_acquire;
  const auto& rel = dlock::redis::scripts::simple_release;
  freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", acq.source.data(), acq.source.size()));
  freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", rel.source.data(), rel.source.size()));
  int i = 0;
  for (auto _ : state) dlock_bench::raw_cycle(state, c, name_for(state.thread_index(), i++), acq, rel, replicas);
  redisFree(c);
}
void BM_raw_master(benchmark::State& state) { raw_loop(state, 0); }
void BM_raw_master_wait1(benchmark::State& state) { raw_loop(state, 1); }

void dlock_loop(benchmark::State& state, const std::string& query) {
  dlock_bench::dlock_cycles(state, sentinel_uri() + query, name_for);
}
void BM_dlock_sentinel(benchmark::State& state) { dlock_loop(state, "?ttl=30s"); }
void BM_dlock_sentinel_min_replicas1(benchmark::State& state) { dlock_loop(state, "?ttl=30s&min_replicas=1"); }

}  // namespace

BENCHMARK(BM_raw_master)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_sentinel)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_raw_master_wait1)->Threads(1)->UseRealTime();
BENCHMARK(BM_dlock_sentinel_min_replicas1)->Threads(1)->UseRealTime();

BENCHMARK_MAIN();
