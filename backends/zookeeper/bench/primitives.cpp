// The reader-writer lock and the semaphore: dlock vs the raw C client sending the same requests,
// uncontended, one acquire + release per iteration (with the server's requests and packets per
// iteration, as zookeeper_bench.cpp counts them).
//   primitives/zookeeper/read/raw|dlock: create2 "_c_<uuid>-__READ__" (ephemeral sequential),
//     get_children, a pipelined exists-watch on the granted node (dlock's loss watch), delete.
//   primitives/zookeeper/semaphore/raw|dlock (InterProcessSemaphoreV2, 1 permit of 4): the internal
//     mutex (create2 in locks/, get_children, pipelined exists-watch), create2 in leases/,
//     get_children of leases/ with a watch, delete the mutex node; pipelined exists-watch on the
//     lease node; at release, delete it. dlock: try_acquire_for (the waiting form takes the mutex).
//   primitives/zookeeper/semaphore_try/raw|dlock: try_acquire, which skips the internal mutex.
//   primitives/zookeeper/read_one_name/raw|dlock at 1 and 8 threads: every thread reads the SAME
//     name (readers together): throughput at 8 vs 1 is how reads scale. dlock: one backend (one
//     session) for all threads, as in a service; raw: the same, one shared session.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "bench_common.hpp"
#include "dlock/spi.hpp"

namespace {

void noop_watcher(zhandle_t*, int, int, const char*, void*) {}
void ignore_stat(int, const Stat*, const void*) {}

// create2 of an ephemeral sequential node under `parent` (made, as a container, when missing).
bool create_node(zhandle_t* zh, const std::string& parent, const std::string& node_name, std::string& created) {
  char path[512];
  Stat st{};
  const auto prefix = parent + "/_c_" + dlock::spi::random_uuid() + "-" + node_name;
  int rc =
      zoo_create2(zh, prefix.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof path, &st);
  if (rc == ZNONODE) {
    zoo_create(zh, zk_bench::raw_root().c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
    const auto folder = parent.substr(0, parent.rfind('/'));
    zoo_create(zh, folder.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0);
    zoo_create(zh, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0);
    rc =
        zoo_create2(zh, prefix.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof path, &st);
  }
  created = path;
  return rc == ZOK;
}

int children_count(zhandle_t* zh, const std::string& parent, bool watch) {
  String_vector v{0, nullptr};
  const int rc = watch ? zoo_wget_children(zh, parent.c_str(), &noop_watcher, nullptr, &v)
                       : zoo_get_children(zh, parent.c_str(), 0, &v);
  const int n = rc == ZOK ? v.count : -1;
  deallocate_String_vector(&v);
  return n;
}

void watch_pipelined(zhandle_t* zh, const std::string& path) {
  zoo_awexists(zh, path.c_str(), &noop_watcher, nullptr, &ignore_stat, nullptr);
}

// One read acquire + release with the raw client, in `parent`.
bool raw_read_once(zhandle_t* zh, const std::string& parent) {
  std::string ours;
  if (!create_node(zh, parent, "__READ__", ours)) return false;
  if (children_count(zh, parent, false) < 1) return false;
  watch_pipelined(zh, ours);
  return zoo_delete(zh, ours.c_str(), -1) == ZOK;
}

void read_raw(benchmark::State& state) {
  zhandle_t* zh = zk_bench::raw_connect();
  if (!zh) return state.SkipWithError("no session");
  const auto parent = zk_bench::raw_root() + "/bench-rw-raw-" + dlock::spi::random_token();
  const auto before = zk_bench::server_packets();
  for (auto _ : state)
    if (!raw_read_once(zh, parent)) {
      state.SkipWithError("raw read failed");
      break;
    }
  zk_bench::report_packets(state, before);
  zookeeper_close(zh);
}

void read_dlock(benchmark::State& state) {
  auto b = dlock::open(zk_bench::server_uri());
  auto rw = b->make_rw_lock("bench-rw-" + dlock::spi::random_token());
  const auto before = zk_bench::server_packets();
  zk_bench::acquire_and_release(
      state, [&] { return rw->try_acquire_read(); }, "try_acquire_read failed");
  zk_bench::report_packets(state, before);
}

void semaphore_raw(benchmark::State& state) {
  zhandle_t* zh = zk_bench::raw_connect();
  if (!zh) return state.SkipWithError("no session");
  const auto path = zk_bench::raw_root() + "/bench-sem-raw-" + dlock::spi::random_token();
  const auto locks = path + "/locks", leases = path + "/leases";
  constexpr int max_count = 4;
  const auto before = zk_bench::server_packets();
  for (auto _ : state) {
    std::string mutex_node, lease_node;
    bool ok = create_node(zh, locks, "lock-", mutex_node) && children_count(zh, locks, false) == 1;
    if (ok) {
      watch_pipelined(zh, mutex_node);
      ok = create_node(zh, leases, "lease-", lease_node) && children_count(zh, leases, true) <= max_count;
      ok = zoo_delete(zh, mutex_node.c_str(), -1) == ZOK && ok;
    }
    if (ok) {
      watch_pipelined(zh, lease_node);
      ok = zoo_delete(zh, lease_node.c_str(), -1) == ZOK;
    }
    if (!ok) {
      state.SkipWithError("raw semaphore failed");
      break;
    }
  }
  zk_bench::report_packets(state, before);
  zookeeper_close(zh);
}

// try_acquire_for: the waiting form, through the internal mutex (try_acquire skips it: below).
void semaphore_dlock(benchmark::State& state) {
  auto b = dlock::open(zk_bench::server_uri());
  auto sem = b->make_semaphore("bench-sem-" + dlock::spi::random_token(), 4);
  const auto before = zk_bench::server_packets();
  zk_bench::acquire_and_release(
      state, [&] { return sem->try_acquire_for(std::chrono::seconds(10)); }, "semaphore try_acquire failed");
  zk_bench::report_packets(state, before);
}

// The semaphore's try_acquire, without the internal mutex: create2 in leases/, get_children of
// leases/, pipelined exists-watch, delete.
void semaphore_try_raw(benchmark::State& state) {
  zhandle_t* zh = zk_bench::raw_connect();
  if (!zh) return state.SkipWithError("no session");
  const auto leases = zk_bench::raw_root() + "/bench-semtry-raw-" + dlock::spi::random_token() + "/leases";
  const auto before = zk_bench::server_packets();
  for (auto _ : state) {
    std::string lease_node;
    bool ok = create_node(zh, leases, "lease-", lease_node) && children_count(zh, leases, false) <= 4;
    if (ok) {
      watch_pipelined(zh, lease_node);
      ok = zoo_delete(zh, lease_node.c_str(), -1) == ZOK;
    }
    if (!ok) {
      state.SkipWithError("raw semaphore try failed");
      break;
    }
  }
  zk_bench::report_packets(state, before);
  zookeeper_close(zh);
}

void semaphore_try_dlock(benchmark::State& state) {
  auto b = dlock::open(zk_bench::server_uri());
  auto sem = b->make_semaphore("bench-semtry-" + dlock::spi::random_token(), 4);
  const auto before = zk_bench::server_packets();
  zk_bench::acquire_and_release(
      state, [&] { return sem->try_acquire(); }, "semaphore try_acquire failed");
  zk_bench::report_packets(state, before);
}

// Every thread on one name (readers together); one session shared by all threads.
const std::string& one_name() {
  static const std::string name = "bench-readers-" + dlock::spi::random_token();
  return name;
}

void read_one_name_raw(benchmark::State& state) {
  static zhandle_t* const shared = zk_bench::raw_connect();
  if (!shared) return state.SkipWithError("no session");
  const auto parent = zk_bench::raw_root() + "/" + one_name() + "-raw";
  for (auto _ : state)
    if (!raw_read_once(shared, parent)) {
      state.SkipWithError("raw read failed");
      break;
    }
}

void read_one_name_dlock(benchmark::State& state) {
  static const std::shared_ptr<dlock::backend> shared = dlock::open(zk_bench::server_uri());
  auto rw = shared->make_rw_lock(one_name());
  zk_bench::acquire_and_release(
      state, [&] { return rw->try_acquire_read(); }, "a reader was refused beside readers");
}

}  // namespace

BENCHMARK(read_raw)->Name("primitives/zookeeper/read/raw")->UseRealTime();
BENCHMARK(read_dlock)->Name("primitives/zookeeper/read/dlock")->UseRealTime();
BENCHMARK(semaphore_raw)->Name("primitives/zookeeper/semaphore/raw")->UseRealTime();
BENCHMARK(semaphore_dlock)->Name("primitives/zookeeper/semaphore/dlock")->UseRealTime();
BENCHMARK(semaphore_try_raw)->Name("primitives/zookeeper/semaphore_try/raw")->UseRealTime();
BENCHMARK(semaphore_try_dlock)->Name("primitives/zookeeper/semaphore_try/dlock")->UseRealTime();
BENCHMARK(read_one_name_raw)->Name("primitives/zookeeper/read_one_name/raw")->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(read_one_name_dlock)->Name("primitives/zookeeper/read_one_name/dlock")->Threads(1)->Threads(8)->UseRealTime();
