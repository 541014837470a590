#pragma once
// Redis Cluster for redis+cluster://, redis+reentrant+cluster://, redis+fair+cluster://: which
// master serves a key, and following the cluster when slots move. Internal to the redis backends.
//
// hiredis (0.14 in Debian 12) has no cluster support and Debian packages no cluster client for C or
// C++, so the routing is this one unit: the key's slot (CRC16 of the key or of its {hash tag}, as
// the cluster specification defines it), the slot map read with CLUSTER SLOTS from any known node,
// and the redirections a node answers with (MOVED: the slot has a new owner, read the map again;
// ASK: this one key is being migrated, send it once to the target after ASKING). Every key of one
// lock carries the same hash tag (Redisson's layout: redisson_lock__channel:{name} beside name), so
// one lock's scripts always run on one node. The pipelines and pools are per node.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "connection.hpp"

namespace dlock {
class uri;
}

namespace dlock::redis {

class pipeline;

inline constexpr std::size_t cluster_slots = 16384;

// The cluster specification's HASH_SLOT: CRC16 (XMODEM) of the key, or of the text between the
// first '{' and the next '}' when that text is not empty, modulo 16384.
std::uint16_t key_slot(std::string_view key) noexcept;

// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381".
struct redirection {
  bool ask = false;  // ASK: only this command goes to `to`, preceded by ASKING
  std::uint16_t slot = 0;
  std::string host;
  std::uint16_t port = 0;
};
std::optional<redirection> redirection_of(const redisReply* r) noexcept;

// One server that lock commands go to: the one server of redis:// (or the master the sentinels
// name), or one master of a cluster. Its pool, and the auto-pipeline over it.
struct node {
  std::shared_ptr<pool> connections;
  std::unique_ptr<pipeline> requests;
  ~node();
};

class cluster_map {
 public:
  // Makes the node for an address (its pool and pipeline; the caller adds its listeners).
  using node_factory = std::function<std::shared_ptr<node>(const endpoint& where)>;

  // `seeds`: the URI's hosts, with its credentials and timeouts.
  cluster_map(std::vector<endpoint> seeds, node_factory make);

  // Reads CLUSTER SLOTS from a node that answers (the known masters first, then the seeds). ec:
  // no node reachable (backend_unavailable), credentials refused (authentication_failed), a server
  // not in cluster mode or slots not all covered (backend_error).
  void refresh(std::error_code& ec) noexcept;
  // The node serving `slot` now (by the last map read). nullptr + ec when the slot has no master
  // (the map is read again first, once).
  std::shared_ptr<node> for_slot(std::uint16_t slot, std::error_code& ec) noexcept;
  // A MOVED answer: the slot is served at `to` from now on (the rest of the map is read again
  // before the next lookup of a slot whose owner was not learned meanwhile). Returns that node.
  std::shared_ptr<node> moved(const redirection& to) noexcept;
  // The map is read again before the next lookup (a node refused or dropped a subscription).
  void mark_stale() noexcept;
  // A connection to `where` could not be opened: the map is stale, and that node is asked for it
  // last (a dead master's connect timeout is not paid before the live nodes are asked). `reachable`
  // undoes it once a connection to it opens.
  void unreachable(const endpoint& where) noexcept;
  void reachable(const endpoint& where) noexcept;
  // The node at an address (an ASK target), made if it was not known.
  std::shared_ptr<node> at(const std::string& host, std::uint16_t port) noexcept;
  // Every node routed to so far.
  std::vector<std::shared_ptr<node>> known() noexcept;
  // Any reachable node, for the subscriber (a PUBLISH reaches every node of a cluster).
  std::unique_ptr<connection> open_any(const endpoint& where, std::error_code& ec) noexcept;
  // "cluster 127.0.0.1:16400,127.0.0.1:16401" (what messages name)
  std::string label() const;

 private:
  void refresh_locked(std::error_code& ec) noexcept;  // under refresh_mutex_
  std::shared_ptr<node> node_at_locked(const endpoint& where);
  endpoint with_address(const std::string& host, std::uint16_t port) const;

  std::vector<endpoint> seeds_;
  node_factory make_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<node>> nodes_;  // by label: every node ever routed to
  std::array<std::shared_ptr<node>, cluster_slots> owner_{};
  bool stale_ = false;                 // a MOVED was seen: read the whole map at the next miss
  std::set<std::string> unreachable_;  // labels of the nodes whose last connect failed
  std::mutex refresh_mutex_;           // one CLUSTER SLOTS at a time
};

// redis+...+cluster:// URIs: the seeds (every host of the URI, with its credentials); the
// database must be 0 (a cluster has only that one). Throws dlock::error(invalid_uri).
std::vector<endpoint> parse_cluster_seeds(const uri& u, const endpoint& first);

}  // namespace dlock::redis
