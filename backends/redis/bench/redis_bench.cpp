// dlock's redis:// lock against a raw hiredis loop doing exactly the same commands (EVALSHA of
// the same acquire script, EVALSHA of the same release script) on one connection per thread, in
// the same process run. DLOCK_REDIS_URI names the server.
//   taskset -c 1 redis_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "scripts.hpp"

namespace {

std::string server_uri() {
  const char* v = std::getenv("DLOCK_REDIS_URI");
  return v ? v : "redis://127.0.0.1:6379";
}

std::string name_for(int thread, int i) { return "bench:" + std::to_string(thread * 8 + i % 8); }

void BM_raw_hiredis(benchmark::State& state) {
  const auto u = dlock::uri::parse(server_uri());
  redisContext* c = redisConnect(u.hosts()[0].host.c_str(), u.hosts()[0].port_or(6379));
  const auto& acq = dlock::redis::scripts::simple_acquire;
  const auto& rel = dlock::redis::scripts::simple_release;
  freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", acq.source.data(), acq.source.size()));
  freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", rel.source.data(), rel.source.size()));
  int i = 0;
  for (auto _ : state) {
    const auto name = name_for(state.thread_index(), i++);
    const auto fence = "dlock_fencing:{" + name + "}";
    const auto channel = "dlock__channel:{" + name + "}";
    const auto token = dlock::spi::random_token();
    auto* r = static_cast<redisReply*>(redisCommand(c, "EVALSHA %s 2 %b %b %b 30000", acq.sha1.c_str(), name.data(),
                                                    name.size(), fence.data(), fence.size(), token.data(), token.size()));
    if (!r || r->type != REDIS_REPLY_ARRAY || r->element[0]->integer != 1) state.SkipWithError("raw acquire failed");
    freeReplyObject(r);
    r = static_cast<redisReply*>(redisCommand(c, "EVALSHA %s 2 %b %b %b", rel.sha1.c_str(), name.data(), name.size(),
                                              channel.data(), channel.size(), token.data(), token.size()));
    freeReplyObject(r);
  }
  redisFree(c);
}

std::shared_ptr<dlock::backend> shared_backend(const std::string& query) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<dlock::backend>> opened;
  std::lock_guard lock(m);
  auto& b = opened[query];
  if (!b) b = dlock::default_registry().open(server_uri() + query);
  return b;
}

void dlock_loop(benchmark::State& state, const std::string& query) {
  auto b = shared_backend(query);
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < 8; ++i) locks.push_back(b->make_lock(name_for(state.thread_index(), i)));
  int i = 0;
  for (auto _ : state) {
    auto l = locks[i++ % 8]->try_acquire();
    if (!l) state.SkipWithError("dlock acquire failed");
    l.release();
  }
}
void BM_dlock(benchmark::State& state) { dlock_loop(state, "?ttl=30s"); }
void BM_dlock_no_watchdog(benchmark::State& state) { dlock_loop(state, "?ttl=30s&watchdog=false"); }

// 8 threads contend on one name with acquire() (notified waiting, no polling); each iteration
// measures release -> next holder, reported as the median in microseconds.
void BM_dlock_handoff_8way(benchmark::State& state) {
  auto b = shared_backend("?ttl=30s&poll=30s..30s");
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    std::atomic<clock::rep> released_at{0};
    std::mutex samples_mutex;
    std::vector<double> samples;
    const auto name = "bench:handoff:" + dlock::spi::random_token();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        auto lock = b->make_lock(name);
        for (int k = 0; k < 25; ++k) {
          auto l = lock->acquire();
          const auto now = clock::now().time_since_epoch().count();
          const auto before = released_at.load();
          if (before != 0) {
            std::lock_guard g(samples_mutex);
            samples.push_back(std::chrono::duration<double, std::micro>(clock::duration(now - before)).count());
          }
          released_at.store(clock::now().time_since_epoch().count());
          l.release();
        }
      });
    for (auto& t : threads) t.join();
    std::sort(samples.begin(), samples.end());
    state.counters["median_handoff_us"] = samples.empty() ? 0 : samples[samples.size() / 2];
    state.counters["p90_handoff_us"] = samples.empty() ? 0 : samples[samples.size() * 9 / 10];
  }
}

}  // namespace

BENCHMARK(BM_raw_hiredis)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_no_watchdog)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_handoff_8way)->Iterations(1)->UseRealTime();
BENCHMARK_MAIN();
