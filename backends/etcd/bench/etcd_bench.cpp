// dlock etcd:// vs a raw client sending the same requests over the same transport (the backend's own
// JSON gateway over libcurl), in the same run. Run:
//   etcd_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// DLOCK_ETCD_URI names the server. Each thread takes a name of its own (uncontended); the handoff
// pair measures a release to the waiter's grant.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "gateway.hpp"

namespace etcd = dlock::etcd;
using etcd::base64_encode;
using etcd::json;

namespace {

std::string server() {
  const char* v = std::getenv("DLOCK_ETCD_URI");
  return v ? v : "etcd://127.0.0.1:2379";
}

etcd::gateway& raw_gateway() {
  static etcd::gateway gw([] {
    etcd::gateway_options o;
    for (const auto& h : dlock::uri::parse(server()).hosts()) o.endpoints.push_back(h.to_string());
    return o;
  }());
  return gw;
}

std::string prefix_end(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

std::string hex(std::int64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(v));
  return text;
}

// The requests of dlock's uncontended acquire and release (etcd_lock.cpp), with the same bodies: a
// lease grant; a transaction that puts `<name>/<lease hex>` if absent and reads the first key by
// create revision; the compare-and-delete of that key; the lease's revoke. Four round trips.
bool raw_cycle(etcd::gateway& gw, const std::string& prefix, const std::string& owner) {
  const auto granted = gw.call("/v3/lease/grant", {{"TTL", "30"}});
  const auto lease = etcd::int64_field(granted, "ID");
  const auto key = prefix + hex(lease);
  const json first = {{"key", base64_encode(prefix)},
                      {"range_end", base64_encode(prefix_end(prefix))},
                      {"sort_order", "ASCEND"},
                      {"sort_target", "CREATE"},
                      {"limit", "1"}};
  const json put = {
      {"compare",
       json::array(
           {{{"key", base64_encode(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
      {"success",
       json::array(
           {{{"request_put",
              {{"key", base64_encode(key)}, {"value", base64_encode(owner)}, {"lease", std::to_string(lease)}}}},
            {{"request_range", first}}})},
      {"failure", json::array({{{"request_range", {{"key", base64_encode(key)}}}}, {{"request_range", first}}})}};
  const auto r = gw.call("/v3/kv/txn", put);
  if (!r.value("succeeded", false)) return false;
  const auto revision = etcd::int64_field(r["header"], "revision");
  const json remove = {{"compare", json::array({{{"key", base64_encode(key)},
                                                 {"target", "CREATE"},
                                                 {"result", "EQUAL"},
                                                 {"create_revision", std::to_string(revision)}}})},
                       {"success", json::array({{{"request_delete_range", {{"key", base64_encode(key)}}}}})}};
  const bool deleted = gw.call("/v3/kv/txn", remove).value("succeeded", false);
  gw.call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
  return deleted;
}

void raw_gateway_acquire_release(benchmark::State& state) {
  auto& gw = raw_gateway();
  const auto prefix = "bench/raw-" + dlock::spi::random_token() + "/";
  const auto owner = dlock::spi::default_owner_id();
  for (auto _ : state)
    if (!raw_cycle(gw, prefix, owner)) state.SkipWithError("raw cycle failed");
}

std::shared_ptr<dlock::backend> dlock_backend() {
  static const auto b = dlock::open(server() + "?ttl=30s&watchdog=false");
  return b;
}

void dlock_acquire_release(benchmark::State& state) {
  auto lock = dlock_backend()->make_lock("bench/dlock-" + dlock::spi::random_token());
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// Handoff: a waiter queued behind the holder; the time from the holder's release to the waiter's
// grant, per handoff. The raw waiter is the same watch and re-check dlock's waiter does
// (gateway::wait_deleted on its predecessor, then the transaction reading the first key).
template <class Cycle>
void handoffs(benchmark::State& state, Cycle&& one_handoff) {
  std::vector<double> seconds;
  for (auto _ : state) {
    const auto took = one_handoff();
    state.SetIterationTime(took.count());
    seconds.push_back(took.count());
  }
  std::sort(seconds.begin(), seconds.end());
  if (!seconds.empty()) state.counters["p50_ms"] = seconds[seconds.size() / 2] * 1000;
}

void dlock_handoff(benchmark::State& state) {
  auto b = dlock_backend();
  const auto name = "bench/handoff-" + dlock::spi::random_token();
  auto holder = b->make_lock(name), waiter = b->make_lock(name);
  handoffs(state, [&] {
    auto held = holder->try_acquire();
    std::promise<std::chrono::steady_clock::time_point> granted;
    auto waiting = std::async(std::launch::async, [&] {
      auto l = waiter->try_acquire_for(std::chrono::seconds(30));
      granted.set_value(std::chrono::steady_clock::now());
      return l;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // queued behind the holder
    const auto released = std::chrono::steady_clock::now();
    held.release();
    const auto at = granted.get_future().get();
    waiting.get().release();
    return std::chrono::duration<double>(at - released);
  });
}

void raw_gateway_handoff(benchmark::State& state) {
  auto& gw = raw_gateway();
  const auto prefix = "bench/raw-handoff-" + dlock::spi::random_token() + "/";
  const json first = {{"key", base64_encode(prefix)},
                      {"range_end", base64_encode(prefix_end(prefix))},
                      {"sort_order", "ASCEND"},
                      {"sort_target", "CREATE"},
                      {"limit", "1"}};
  auto queue = [&](std::int64_t lease) {
    const auto key = prefix + hex(lease);
    const json put = {{"success", json::array({{{"request_put",
                                                 {{"key", base64_encode(key)},
                                                  {"value", base64_encode(std::string("raw"))},
                                                  {"lease", std::to_string(lease)}}}}})}};
    return std::pair{key, etcd::int64_field(gw.call("/v3/kv/txn", put)["header"], "revision")};
  };
  handoffs(state, [&] {
    const auto holder_lease = etcd::int64_field(gw.call("/v3/lease/grant", {{"TTL", "30"}}), "ID");
    const auto waiter_lease = etcd::int64_field(gw.call("/v3/lease/grant", {{"TTL", "30"}}), "ID");
    const auto holder = queue(holder_lease);
    const auto waiter = queue(waiter_lease);
    const std::string& holder_key = holder.first;
    const std::int64_t holder_rev = holder.second, waiter_rev = waiter.second;
    std::promise<std::chrono::steady_clock::time_point> granted;
    auto waiting = std::async(std::launch::async, [&] {
      gw.wait_deleted(holder_key, waiter_rev + 1, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                      std::chrono::seconds(10), [] {});
      const auto again = gw.call("/v3/kv/txn", {{"success", json::array({{{"request_range", first}}})}});
      (void)again;
      granted.set_value(std::chrono::steady_clock::now());
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the watch is in place
    // The holder lets go as dlock's release does: the compare-and-delete of its key, then the revoke.
    const json remove = {{"compare", json::array({{{"key", base64_encode(holder_key)},
                                                   {"target", "CREATE"},
                                                   {"result", "EQUAL"},
                                                   {"create_revision", std::to_string(holder_rev)}}})},
                         {"success", json::array({{{"request_delete_range", {{"key", base64_encode(holder_key)}}}}})}};
    const auto released = std::chrono::steady_clock::now();
    gw.call("/v3/kv/txn", remove);
    gw.call("/v3/lease/revoke", {{"ID", std::to_string(holder_lease)}});
    const auto at = granted.get_future().get();
    waiting.get();
    gw.call("/v3/lease/revoke", {{"ID", std::to_string(waiter_lease)}});
    return std::chrono::duration<double>(at - released);
  });
}

}  // namespace

BENCHMARK(raw_gateway_acquire_release)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(dlock_acquire_release)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(raw_gateway_handoff)->UseManualTime()->Iterations(50);
BENCHMARK(dlock_handoff)->UseManualTime()->Iterations(50);

BENCHMARK_MAIN();
