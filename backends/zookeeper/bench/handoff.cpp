// Contended: handoff (release -> the next holder's grant) and fairness, dlock against the raw floor.
//   raw_handoff_floor: the least a ZooKeeper handoff can cost. Session A deletes a node, session B
//     has an exists-watch on it; the time from A's delete call to B's NodeDeleted event (the
//     server's commit of the delete, fsync included, plus one notification).
//   contended/zookeeper/dlock/threads:N: N threads, a lock object each, one dlock backend (one
//     session), one name, acquire+release for 5 s; the handoff as `dlock bench` measures it (a
//     stamp written just before the release, read right after the next grant, counted only when
//     that acquire started before the release), and each thread's grants against the fair share.
#include <benchmark/benchmark.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "dlock/spi.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct deletion_seen {
  std::mutex m;
  std::condition_variable cv;
  bool seen = false;
  clock_type::time_point at;
};

void on_deleted(zhandle_t*, int type, int, const char*, void* context) {
  if (type != ZOO_DELETED_EVENT) return;
  auto* d = static_cast<deletion_seen*>(context);
  const auto now = clock_type::now();
  std::lock_guard g(d->m);
  d->seen = true;
  d->at = now;
  d->cv.notify_all();
}

void raw_handoff_floor(benchmark::State& state) {
  zhandle_t* holder = zk_bench::raw_connect();
  zhandle_t* waiter = zk_bench::raw_connect();
  if (!holder || !waiter) {
    state.SkipWithError("no session");
    return;
  }
  const std::string parent = zk_bench::raw_root() + "/floor-" + dlock::spi::random_token();
  zoo_create(holder, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  std::vector<double> samples;
  for (auto _ : state) {
    char created[512];
    const auto path = parent + "/n-";
    if (zoo_create(holder, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                   sizeof created) != ZOK) {
      state.SkipWithError("create failed");
      break;
    }
    deletion_seen d;
    Stat st{};
    zoo_wexists(waiter, created, &on_deleted, &d, &st);
    const auto t0 = clock_type::now();
    zoo_delete(holder, created, -1);
    std::unique_lock lock(d.m);
    d.cv.wait(lock, [&] { return d.seen; });
    samples.push_back(std::chrono::duration<double, std::micro>(d.at - t0).count());
  }
  state.counters["floor_p50_us"] = zk_bench::percentile_us(samples, 0.5);
  state.counters["floor_p99_us"] = zk_bench::percentile_us(samples, 0.99);
  zoo_delete(holder, parent.c_str(), -1);
  zookeeper_close(waiter);
  zookeeper_close(holder);
}

void contended_dlock(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto backend = dlock::open(zk_bench::server_uri());
  for (auto _ : state) {
    const auto name = "contended-" + dlock::spi::random_token();
    std::atomic<std::int64_t> released_at{0};
    std::atomic<bool> stop{false};
    std::vector<std::vector<double>> handoffs(threads);
    std::vector<std::uint64_t> grants(threads, 0);
    std::vector<std::thread> spawned;
    for (int i = 0; i < threads; ++i)
      spawned.emplace_back([&, i] {
        auto lock = backend->make_lock(name);
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = clock_type::now();
          auto l = lock->acquire();
          const auto granted = clock_type::now();
          const auto released = released_at.load();
          if (released > t0.time_since_epoch().count())
            handoffs[i].push_back(static_cast<double>(granted.time_since_epoch().count() - released) / 1000.0);
          ++grants[i];
          released_at.store(clock_type::now().time_since_epoch().count());
          l.release();
        }
      });
    std::this_thread::sleep_for(std::chrono::seconds(5));
    stop = true;
    for (auto& s : spawned) s.join();
    std::vector<double> all;
    std::uint64_t total = 0;
    for (int i = 0; i < threads; ++i) {
      all.insert(all.end(), handoffs[i].begin(), handoffs[i].end());
      total += grants[i];
    }
    const double fair = static_cast<double>(total) / threads;
    const auto [least, most] = std::minmax_element(grants.begin(), grants.end());
    state.counters["cycles_per_s"] = static_cast<double>(total) / 5.0;
    state.counters["handoff_p50_us"] = zk_bench::percentile_us(all, 0.5);
    state.counters["handoff_p99_us"] = zk_bench::percentile_us(all, 0.99);
    state.counters["least_share"] = static_cast<double>(*least) / fair;  // >= 0.5: within 2x of fair
    state.counters["most_share"] = static_cast<double>(*most) / fair;
  }
}

}  // namespace

BENCHMARK(raw_handoff_floor)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(contended_dlock)
    ->Name("contended/zookeeper/dlock")
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
