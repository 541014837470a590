#pragma once
// What the zookeeper_bench sources share: the server under test, raw client sessions, and the
// percentiles and fairness figures of a timed contended run.
#include <benchmark/benchmark.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "four_letter.hpp"

namespace zk_bench {

inline std::string server_uri() {
  const char* v = std::getenv("DLOCK_ZOOKEEPER_URI");
  return v ? v : "zookeeper://127.0.0.1:2181/dlock";
}

// "host:port" of the first host, and the chroot-less root path ("/dlock"), for the raw C client.
inline std::string raw_hosts() {
  const auto u = dlock::uri::parse(server_uri());
  return u.hosts()[0].host + ":" + std::to_string(u.hosts()[0].port_or(2181));
}
inline std::string raw_root() { return dlock::uri::parse(server_uri()).path(); }

// A raw C client session, connected (or nullptr after 10 s).
inline zhandle_t* raw_connect(watcher_fn watcher = nullptr, void* context = nullptr) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(raw_hosts().c_str(), watcher, 10000, nullptr, context, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (zh && zoo_state(zh) != ZOO_CONNECTED_STATE) {
    if (std::chrono::steady_clock::now() > deadline) {
      zookeeper_close(zh);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return zh;
}

// Percentile (0..1) of samples in microseconds; sorts them.
inline double percentile_us(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1));
  return samples[at];
}

// The server's packet counters (four-letter word srvr: "Received: N", "Sent: N"), read around a
// timed loop and reported per iteration: requests (Received) and replies + watch notifications
// (Sent) per acquire + release. Other sessions' pings add a few hundredths.
struct packet_counts {
  double received = 0, sent = 0;
};

inline packet_counts server_packets() {
  packet_counts out;
  const std::string reply = dlock::zookeeper::testing::four_letter(server_uri(), "srvr");
  const auto number_after = [&](const char* key) {
    const auto at = reply.find(key);
    return at == std::string::npos ? 0.0 : std::stod(reply.substr(at + std::strlen(key)));
  };
  out.received = number_after("Received: ");
  out.sent = number_after("Sent: ");
  return out;
}

// Each iteration: one `acquire()` of a dlock primitive and its release. A refused acquire ends the
// run, saying `refused`: uncontended, every acquire must be granted.
template <class Acquire>
void acquire_and_release(benchmark::State& state, Acquire acquire, const char* refused) {
  for (auto _ : state) {
    auto l = acquire();
    if (!l) {
      state.SkipWithError(refused);
      break;
    }
    l.release();
  }
}

inline void report_packets(benchmark::State& state, const packet_counts& before) {
  const auto after = server_packets();
  const auto n = static_cast<double>(state.iterations());
  state.counters["requests"] = (after.received - before.received) / n;
  state.counters["server_packets"] = (after.sent - before.sent) / n;
}

}  // namespace zk_bench
