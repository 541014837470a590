#pragma once
// The settings of redis://, redis+reentrant:// and redis+fair:// (and their Sentinel and Cluster
// schemes), read from the URI, and what they change in the scripts sent.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connection.hpp"
#include "dlock/uri.hpp"
#include "replication.hpp"
#include "sentinel.hpp"

namespace dlock::redis {

enum class mode { simple, reentrant, fair };

struct settings {
  endpoint where;
  std::size_t pool_size = 16;
  std::string prefix;     // prepended to every key; empty = redis-py / Redisson layout
  std::string client_id;  // Redisson client UUID in owner fields
  mode lock_mode = mode::simple;
  std::chrono::milliseconds fair_wait{300000};  // Redisson's threadWaitTime (fairLockWaitTimeout)
  // antirez's delayed restart, on the client side: grant nothing while the server is younger than
  // the lock's ttl, so every holder from before a restart without persistence has passed its
  // validity deadline (and been told) before anyone else is granted. false only for servers that
  // persist every write (appendfsync always).
  bool wait_after_restart = true;
  replication replicas;  // min_replicas / replica_timeout (replication.hpp)
  // redis+...+sentinel://: where the master is comes from these sentinels (sentinel.hpp).
  std::optional<sentinel_settings> sentinel;
  // redis+...+cluster://: the nodes first asked for the slot map (cluster.hpp); empty otherwise.
  std::vector<endpoint> cluster_seeds;
  // Releases are published with SPUBLISH and waited for with SSUBSCRIBE on the slot's master
  // (sharded pub/sub: a cluster of Redis 7 or later, unless pubsub=classic). Set at open.
  bool sharded_pubsub = false;
  enum class pubsub_choice { automatic, sharded, classic } pubsub = pubsub_choice::automatic;
};

// The script as sent with these settings: with sharded pub/sub, its redis.call('publish', ...)
// calls are SPUBLISH (made once per script). The Redisson scripts that take the command as an
// argument get publish_command() instead.
const script& as_published(const settings& cfg, const script& s);
std::string_view publish_command(const settings& cfg) noexcept;

settings parse_settings(const uri& u, mode m);  // throws dlock::error(invalid_uri)

// The trailer that makes a grant or a renewal wait for min_replicas replicas (none without it).
std::vector<std::string_view> replica_wait(const settings& cfg);

}  // namespace dlock::redis
