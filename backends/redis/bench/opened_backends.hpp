#pragma once
// What the redis bench programs share: one backend per URI for all of a benchmark's threads (a
// service opens its backend once), the uncontended dlock loop the raw loops are measured against,
// and the raw loop's one cycle.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connection.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

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

// The raw client's cycle on `name`, what redis:// sends for it: EVALSHA of the acquire script
// (SET NX PX and the fencing counter; its other keys are read only when the name is taken),
// `WAIT replicas 100` when replicas > 0, EVALSHA of the release script, which publishes to the
// mutex's waiters and to the name's reader-writer lock waiters (both loaded on `c` beforehand).
inline void raw_cycle(benchmark::State& state, redisContext* c, const std::string& name,
                      const dlock::redis::script& acquire, const dlock::redis::script& release, int replicas = 0) {
  const auto fence = "redisson_lock_token:{" + name + "}";
  const auto waiting = "{" + name + "}:dlock_writers_waiting", permits = "{" + name + "}:timeout";
  const auto channel = "redisson_lock__channel:{" + name + "}", rw_channel = "redisson_rwlock:{" + name + "}";
  const auto token = "dlock:" + dlock::spi::random_token();
  auto* r = static_cast<redisReply*>(redisCommand(
      c, "EVALSHA %s 4 %b %b %b %b %b 30000 %s", acquire.sha1.c_str(), name.data(), name.size(), fence.data(),
      fence.size(), waiting.data(), waiting.size(), permits.data(), permits.size(), token.data(), token.size(), ""));
  if (!r || r->type != REDIS_REPLY_ARRAY || r->element[0]->integer != 1) state.SkipWithError("raw acquire failed");
  freeReplyObject(r);
  if (replicas > 0) {
    r = static_cast<redisReply*>(redisCommand(c, "WAIT %d 100", replicas));
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < replicas) state.SkipWithError("raw WAIT short");
    freeReplyObject(r);
  }
  r = static_cast<redisReply*>(redisCommand(c, "EVALSHA %s 3 %b %b %b %b", release.sha1.c_str(), name.data(),
                                            name.size(), channel.data(), channel.size(), rw_channel.data(),
                                            rw_channel.size(), token.data(), token.size()));
  freeReplyObject(r);
}

}  // namespace dlock_bench
