// The reader-writer lock and the semaphore of redis:// against a raw hiredis loop running exactly
// the same scripts (EVALSHA of shared_scripts.hpp's acquire, then its release) on one connection
// per thread, in the same process run. DLOCK_REDIS_URI names the server.
//   redis_shared_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// Pairs to compare (items_per_second): raw/read vs dlock/read, raw/semaphore vs dlock/semaphore
// (uncontended, one thread), and each of the */one_name benchmarks at 8 threads vs 1 (8 readers
// of one name must not run one at a time; dlock/read_one_name_holding_2ms shows it with the
// server's work per grant kept small beside the time held).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "opened_backends.hpp"
#include "shared_scripts.hpp"

namespace {

std::string server_uri() {
  const char* v = std::getenv("DLOCK_REDIS_URI");
  return v ? v : "redis://127.0.0.1:6379";
}

std::shared_ptr<dlock::backend> shared_backend(const std::string& query) {
  return dlock_bench::opened_backend(server_uri() + query);
}

struct raw_connection {
  redisContext* c;
  raw_connection() {
    const auto u = dlock::uri::parse(server_uri());
    c = redisConnect(u.hosts()[0].host.c_str(), u.hosts()[0].port_or(6379));
  }
  ~raw_connection() { redisFree(c); }
  void load(const dlock::redis::script& s) {
    freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", s.source.data(), s.source.size()));
  }
  // EVALSHA with binary-safe keys and arguments; the reply's first integer, or -99.
  long long evalsha(const dlock::redis::script& s, const std::vector<std::string>& keys,
                    const std::vector<std::string>& args) {
    std::vector<const char*> argv{"EVALSHA", s.sha1.c_str()};
    std::vector<size_t> lens{7, s.sha1.size()};
    const auto nkeys = std::to_string(keys.size());
    argv.push_back(nkeys.c_str());
    lens.push_back(nkeys.size());
    for (const auto* part : {&keys, &args})
      for (const auto& a : *part) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    long long out = -99;
    if (r && r->type == REDIS_REPLY_INTEGER) out = r->integer;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0) out = r->element[0]->integer;
    freeReplyObject(r);
    return out;
  }
};

// The names: eight per thread (uncontended), or one for every thread (readers together).
std::string name_for(const benchmark::State& state, int i, bool one_name) {
  return one_name ? "bench-rw:shared" : "bench-rw:" + std::to_string(state.thread_index() * 8 + i % 8);
}

// Readers of one name that each hold for `hold` (the work done under the lock, a sleep): if reads
// ran one at a time, 8 threads would get through no more holds per second than 1.
void dlock_read_holding(benchmark::State& state, std::chrono::microseconds hold) {
  auto b = shared_backend("?ttl=30s");
  auto lock = b->make_rw_lock("bench-rw:held");
  for (auto _ : state) {
    auto l = lock->try_acquire_read();
    if (!l) state.SkipWithError("dlock read acquire failed");
    std::this_thread::sleep_for(hold);
    l.release();
  }
  state.SetItemsProcessed(state.iterations());
}

void raw_read(benchmark::State& state, bool one_name) {
  raw_connection rc;
  rc.load(dlock::redis::scripts::rw_read_acquire);
  rc.load(dlock::redis::scripts::rw_read_release);
  // As dlock builds them: the owner field and Redisson's derived names.
  const auto field = dlock::spi::random_uuid() + ":" + std::to_string(state.thread_index());
  int i = 0;
  for (auto _ : state) {
    const auto name = name_for(state, i++, one_name);
    const auto timeouts = "{" + name + "}:" + field + ":rwlock_timeout";
    if (rc.evalsha(dlock::redis::scripts::rw_read_acquire,
                   {name, timeouts, "redisson_lock_token:{" + name + "}", "{" + name + "}:dlock_writers_waiting",
                    "{" + name + "}:timeout"},
                   {"30000", field}) != -1)
      state.SkipWithError("raw read acquire failed");
    rc.evalsha(dlock::redis::scripts::rw_read_release,
               {name, "redisson_rwlock:{" + name + "}", timeouts, "{" + name + "}",
                "redisson_lock__channel:{" + name + "}", "redisson_lock_queue:{" + name + "}"},
               {field});
  }
  state.SetItemsProcessed(state.iterations());
}

void dlock_read(benchmark::State& state, bool one_name, const std::string& query) {
  auto b = shared_backend(query);
  std::vector<std::unique_ptr<dlock::rw_lock>> locks;
  for (int i = 0; i < 8; ++i) locks.push_back(b->make_rw_lock(name_for(state, i, one_name)));
  int i = 0;
  for (auto _ : state) {
    auto l = locks[i++ % 8]->try_acquire_read();
    if (!l) state.SkipWithError("dlock read acquire failed");
    l.release();
  }
  state.SetItemsProcessed(state.iterations());
}

void raw_semaphore(benchmark::State& state) {
  raw_connection rc;
  rc.load(dlock::redis::scripts::semaphore_acquire);
  rc.load(dlock::redis::scripts::semaphore_release);
  int i = 0;
  for (auto _ : state) {
    const auto name = "bench-sem:" + std::to_string(state.thread_index() * 8 + i++ % 8);
    // A 16-byte permit id from 128 random bits, as dlock makes one.
    const auto hex = dlock::spi::random_token();
    std::string id(16, '\0');
    for (std::size_t k = 0; k < 16; ++k) id[k] = static_cast<char>(std::stoi(hex.substr(2 * k, 2), nullptr, 16));
    const auto timeouts = "{" + name + "}:timeout", channel = "redisson_sc:{" + name + "}";
    if (rc.evalsha(dlock::redis::scripts::semaphore_acquire,
                   {name, timeouts, channel, "dlock_semaphore_token:{" + name + "}"}, {"30000", "4", "1", id}) != -1)
      state.SkipWithError("raw semaphore acquire failed");
    rc.evalsha(dlock::redis::scripts::semaphore_release, {name, timeouts, channel}, {id});
  }
  state.SetItemsProcessed(state.iterations());
}

void dlock_semaphore(benchmark::State& state, const std::string& query) {
  auto b = shared_backend(query);
  std::vector<std::unique_ptr<dlock::semaphore>> sems;
  for (int i = 0; i < 8; ++i)
    sems.push_back(b->make_semaphore("bench-sem:" + std::to_string(state.thread_index() * 8 + i), 4));
  int i = 0;
  for (auto _ : state) {
    auto l = sems[i++ % 8]->try_acquire();
    if (!l) state.SkipWithError("dlock semaphore acquire failed");
    l.release();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_raw_read(benchmark::State& s) { raw_read(s, false); }
void BM_dlock_read(benchmark::State& s) { dlock_read(s, false, "?ttl=30s"); }
void BM_dlock_read_no_watchdog(benchmark::State& s) { dlock_read(s, false, "?ttl=30s&watchdog=false"); }
void BM_raw_read_one_name(benchmark::State& s) { raw_read(s, true); }
void BM_dlock_read_one_name(benchmark::State& s) { dlock_read(s, true, "?ttl=30s"); }
void BM_dlock_read_one_name_holding_2ms(benchmark::State& s) { dlock_read_holding(s, std::chrono::milliseconds(2)); }
void BM_raw_semaphore(benchmark::State& s) { raw_semaphore(s); }
void BM_dlock_semaphore(benchmark::State& s) { dlock_semaphore(s, "?ttl=30s"); }
void BM_dlock_semaphore_no_watchdog(benchmark::State& s) { dlock_semaphore(s, "?ttl=30s&watchdog=false"); }

}  // namespace

BENCHMARK(BM_raw_read)->UseRealTime();
BENCHMARK(BM_dlock_read)->UseRealTime();
BENCHMARK(BM_dlock_read_no_watchdog)->UseRealTime();
BENCHMARK(BM_raw_semaphore)->UseRealTime();
BENCHMARK(BM_dlock_semaphore)->UseRealTime();
BENCHMARK(BM_dlock_semaphore_no_watchdog)->UseRealTime();
BENCHMARK(BM_raw_read_one_name)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_read_one_name)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_dlock_read_one_name_holding_2ms)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK_MAIN();
