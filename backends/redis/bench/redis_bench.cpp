// dlock's redis:// lock against a raw hiredis loop doing exactly the same commands (EVALSHA of
// the same acquire script, EVALSHA of the same release script) on one connection per thread, in
// the same process run. DLOCK_REDIS_URI names the server.
//   taskset -c 1 redis_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/held_leases_cpu.hpp"
#include "opened_backends.hpp"
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
  for (auto _ : state) dlock_bench::raw_cycle(state, c, name_for(state.thread_index(), i++), acq, rel);
  redisFree(c);
}

std::shared_ptr<dlock::backend> shared_backend(const std::string& query) {
  return dlock_bench::opened_backend(server_uri() + query);
}

void dlock_loop(benchmark::State& state, const std::string& query) {
  dlock_bench::dlock_cycles(state, server_uri() + query, name_for);
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

// The raw floor of a notified handoff, for dlock bench's contended handoff to be read against:
// one holder and one waiter on raw hiredis connections. The waiter blocks on its SUBSCRIBE
// connection; the holder stamps the time and runs the release script (DEL + PUBLISH); the waiter,
// woken by the message, runs the acquire script; handoff = the stamp to the waiter's grant. That is
// the least any client can do: one release round trip, the message, one acquire round trip.
void BM_raw_pubsub_handoff(benchmark::State& state) {
  using clock = std::chrono::steady_clock;
  const auto u = dlock::uri::parse(server_uri());
  const auto connect = [&] { return redisConnect(u.hosts()[0].host.c_str(), u.hosts()[0].port_or(6379)); };
  const auto& acq = dlock::redis::scripts::simple_acquire;
  const auto& rel = dlock::redis::scripts::simple_release;
  for (auto _ : state) {
    redisContext* holder = connect();
    redisContext* waiter = connect();
    redisContext* subscriber = connect();
    freeReplyObject(redisCommand(holder, "SCRIPT LOAD %b", acq.source.data(), acq.source.size()));
    freeReplyObject(redisCommand(holder, "SCRIPT LOAD %b", rel.source.data(), rel.source.size()));
    const auto name = "bench:raw-handoff:" + dlock::spi::random_token();
    const auto fence = "redisson_lock_token:{" + name + "}";
    const auto writers = "{" + name + "}:dlock_writers_waiting", permits = "{" + name + "}:timeout";
    const auto channel = "redisson_lock__channel:{" + name + "}";
    const std::string nobody = channel + ":nobody";  // the waiter's own release wakes no one
    freeReplyObject(redisCommand(subscriber, "SUBSCRIBE %b", channel.data(), channel.size()));
    // The acquire (with_ttl) and the release, as dlock sends them (without the release's
    // reader-writer lock channel: nobody listens there in this loop).
    const auto eval = [&](redisContext* c, const dlock::redis::script& script, const std::string& key2,
                          const std::string& token, bool with_ttl) {
      auto* r = static_cast<redisReply*>(
          with_ttl ? redisCommand(c, "EVALSHA %s 4 %b %b %b %b %b 30000 %s", script.sha1.c_str(), name.data(),
                                  name.size(), key2.data(), key2.size(), writers.data(), writers.size(), permits.data(),
                                  permits.size(), token.data(), token.size(), "")
                   : redisCommand(c, "EVALSHA %s 2 %b %b %b", script.sha1.c_str(), name.data(), name.size(),
                                  key2.data(), key2.size(), token.data(), token.size()));
      const bool ok = r && ((r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1) ||
                            (r->type == REDIS_REPLY_INTEGER && r->integer == 1));
      freeReplyObject(r);
      return ok;
    };
    constexpr int rounds = 400;
    std::vector<double> samples;
    std::atomic<clock::rep> released_at{0};
    std::atomic<int> waiter_done{-1};
    std::thread waiting([&] {
      for (int k = 0; k < rounds; ++k) {
        void* message = nullptr;
        if (redisGetReply(subscriber, &message) != REDIS_OK) return;
        freeReplyObject(message);
        const auto token = "dlock:" + dlock::spi::random_token();
        if (eval(waiter, acq, fence, token, true)) {
          samples.push_back(std::chrono::duration<double, std::micro>(clock::now().time_since_epoch() -
                                                                      clock::duration(released_at.load()))
                                .count());
          eval(waiter, rel, nobody, token, false);
        }
        waiter_done = k;
      }
    });
    for (int k = 0; k < rounds; ++k) {
      const auto token = "dlock:" + dlock::spi::random_token();
      while (!eval(holder, acq, fence, token, true)) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(300));  // the waiter is back in its read
      released_at = clock::now().time_since_epoch().count();
      eval(holder, rel, channel, token, false);
      while (waiter_done.load() < k) std::this_thread::yield();
    }
    waiting.join();
    std::sort(samples.begin(), samples.end());
    state.counters["median_handoff_us"] = samples.empty() ? 0 : samples[samples.size() / 2];
    state.counters["p99_handoff_us"] = samples.empty() ? 0 : samples[samples.size() * 99 / 100];
    redisFree(subscriber);
    redisFree(waiter);
    redisFree(holder);
  }
}

// What holding many leases costs the process (dlock_test/held_leases_cpu.hpp): the watchdog's timer
// and renewals, the pool, the subscriber. Argument: the ttl in ms (renewal every ttl/3).
void BM_held_leases_cpu(benchmark::State& state) {
  auto b = dlock::default_registry().open(server_uri() +
                                          "?wait_after_restart=false&ttl=" + std::to_string(state.range(0)) + "ms");
  dlock::testing::held_leases_cpu(state, *b, "bench:held:" + dlock::spi::random_token().substr(0, 8) + ":");
}

}  // namespace

BENCHMARK(BM_held_leases_cpu)->Arg(3000)->Arg(30000)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_raw_hiredis)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_no_watchdog)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_handoff_8way)->Iterations(1)->UseRealTime();
BENCHMARK(BM_raw_pubsub_handoff)->Iterations(1)->UseRealTime();
// tools/bench/scaling's rows: uncontended acquire+release, raw against dlock, 1 to 128 threads.
BENCHMARK(BM_raw_hiredis)->Name("scaling/redis/raw")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK(BM_dlock)->Name("scaling/redis/dlock")->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
BENCHMARK_MAIN();
