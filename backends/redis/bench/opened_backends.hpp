#pragma once
// What the redis bench programs share: one backend per URI for all of a benchmark's threads (a
// service opens its backend once), and the uncontended dlock loop the raw loops are measured against.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock_bench {

inline std::shared_ptr<dlock::backend> opened_backend(const std::string& uri) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<dlock::backend>> opened;
  std::lock_guard lock(m);
  auto& b = opened[uri];
  if (!b) b = dlock::default_registry().open(uri);
  return b;
}

// Each thread cycles try_acquire + release over 8 names of its own (`name_for(thread, i)`).
template <class NameFor>
void dlock_cycles(benchmark::State& state, const std::string& uri, NameFor&& name_for) {
  auto b = opened_backend(uri);
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < 8; ++i) locks.push_back(b->make_lock(name_for(state.thread_index(), i)));
  int i = 0;
  for (auto _ : state) {
    auto l = locks[i++ % 8]->try_acquire();
    if (!l) state.SkipWithError("dlock acquire failed");
    l.release();
  }
}

}  // namespace dlock_bench
