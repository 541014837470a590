// What dlock compare's server faults need of the etcd servers (core/compare_spi: family.hpp): the
// single member, and the three-member cluster the ensemble-* faults stop members of.
#include <algorithm>
#include <string>
#include <string_view>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/tcp_exchange.hpp"

namespace dlock::compare_spi {

namespace {

// The body of the member's answer to a POST of `body` to `path` on its v3 JSON gateway (HTTP/1.1,
// the connection closed after it); empty when it did not answer within `timeout` or not with 200.
std::string post(const std::string& host, int port, std::string_view path, std::string_view body,
                 std::chrono::milliseconds timeout) {
  const std::string request = "POST " + std::string(path) + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                              "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\nConnection: close\r\n\r\n" + std::string(body);
  const auto answer = tcp_exchange(host, port, request, timeout);
  if (!answer.starts_with("HTTP/1.1 200") && !answer.starts_with("HTTP/1.0 200")) return {};
  const auto body_at = answer.find("\r\n\r\n");
  return body_at == std::string::npos ? std::string() : answer.substr(body_at + 4);
}

// The string value of the first `"key": "value"` in `json` (the gateway prints uint64 fields as
// decimal strings), or empty.
std::string string_field(const std::string& json, std::string_view key) {
  const auto quoted = "\"" + std::string(key) + "\"";
  auto at = json.find(quoted);
  if (at == std::string::npos) return {};
  at = json.find_first_not_of(" \t\r\n", at + quoted.size());
  if (at == std::string::npos || json[at] != ':') return {};
  at = json.find_first_not_of(" \t\r\n", at + 1);
  if (at == std::string::npos || json[at] != '"') return {};
  const auto end = json.find('"', at + 1);
  return end == std::string::npos ? std::string() : json.substr(at + 1, end - at - 1);
}

// A member leads when its maintenance status names itself leader: `header.member_id` (the member
// that answered) equals `leader` (the leader it knows; "0" or absent while it knows none, as
// without a quorum or during an election). Served by the member itself, without a quorum.
bool status_says_leader(const std::string& host, int port, std::chrono::milliseconds timeout) {
  const auto status = post(host, port, "/v3/maintenance/status", "{}", timeout);
  const auto member = string_field(status, "member_id");
  return !member.empty() && member != "0" && member == string_field(status, "leader");
}

// A grant on the cluster lives as long as its lease: the URI's ttl in whole seconds, at least the
// server's minimum (1.5 election timeouts, rounded up to whole seconds: 2 s with the launcher's
// election timeout of 1 s, backends/etcd/server/recipe.sh), which the server grants instead of a
// shorter TTL. A new leader renews the leases it takes over (the lessor's promotion), so an
// election does not expire them by itself.
std::chrono::milliseconds lease_ttl(std::chrono::milliseconds ttl) {
  constexpr std::chrono::seconds server_minimum{2};
  return std::max<std::chrono::milliseconds>(std::chrono::ceil<std::chrono::seconds>(ttl), server_minimum);
}

constexpr family families[] = {
    // The single member (DLOCK_ETCD_URI) takes the single-server faults; the cluster
    // (DLOCK_ETCD_CLUSTER_URI, etcd-cluster.1..3) the ensemble-* faults, its leader the member whose
    // status says so.
    {.prefix = "etcd",
     .variable = "DLOCK_ETCD_URI",
     .launcher_process = "etcd",
     .connection_kill_not_applicable =
         "an etcd grant is a lease kept by keep-alive requests, each on any connection, not tied to one",
     .quorum = quorum_kind::ensemble,
     .quorum_variable = "DLOCK_ETCD_CLUSTER_URI",
     .quorum_server = "etcd-cluster",
     .is_leader = status_says_leader,
     .ensemble_session = lease_ttl,
     .default_port = 2379},
};

}  // namespace

std::span<const family> families_etcd() noexcept { return families; }

}  // namespace dlock::compare_spi
