// What dlock compare's server faults need of the ZooKeeper servers (core/compare_spi: family.hpp).
#include <string>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/tcp_exchange.hpp"

namespace dlock::compare_spi {

namespace {

// An ensemble node's role as it reports it to the `srvr` four-letter word (the launcher's zoo.cfg
// whitelists every four-letter word): "leader", "follower", "standalone"; empty when the node did
// not answer within `timeout` or answered without a mode (it is not serving: no quorum, an
// election under way).
std::string srvr_mode(const std::string& host, int port, std::chrono::milliseconds timeout) {
  const auto answer = tcp_exchange(host, port, "srvr", timeout, 16384);
  const auto at = answer.find("Mode: ");
  if (at == std::string::npos) return {};
  const auto end = answer.find('\n', at);
  return answer.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

bool srvr_says_leader(const std::string& host, int port, std::chrono::milliseconds timeout) {
  return srvr_mode(host, port, timeout) == "leader";
}

// The session timeout the ensemble faults open the ensemble with, whatever the run's ttl: above an
// election on a loaded machine (measured: well under a second on the launcher's tickTime of
// 500 ms), short enough for a quick run.
std::chrono::milliseconds ensemble_session_timeout(std::chrono::milliseconds /*ttl*/) {
  return std::chrono::seconds(4);
}

constexpr family families[] = {
    // ZooKeeper has no command that ends a client's session: the holder is silenced through a
    // proxy until the server expires its session. The ensemble takes the ensemble-* faults; its
    // leader is the node whose `srvr` answer says so.
    {.prefix = "zookeeper",
     .variable = "DLOCK_ZOOKEEPER_URI",
     .launcher_process = "zookeeper",
     .kill = connection_kill::session_proxy,
     .quorum = quorum_kind::ensemble,
     .quorum_variable = "DLOCK_ZOOKEEPER_ENSEMBLE_URI",
     .quorum_server = "zookeeper-ensemble",
     .is_leader = srvr_says_leader,
     .ensemble_session = ensemble_session_timeout,
     .default_port = 2181},
};

}  // namespace

std::span<const family> families_zookeeper() noexcept { return families; }

}  // namespace dlock::compare_spi
