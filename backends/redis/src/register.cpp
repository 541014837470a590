// The redis family: one folder because the schemes share the connection pool, the subscriber and
// the scripts; each scheme has its own honest capability set.
#include "capabilities.hpp"
#include "redis_backend.hpp"
#include "redlock.hpp"
#include "unsafe.hpp"

namespace dlock {

namespace {

// One scheme of redis_backend: one of its layouts (`mode`), on one kind of deployment. They all
// make the same primitives.
void add_layout(registry& r, std::string scheme, redis::mode mode, capabilities caps, std::string example_uri,
                std::string summary, std::vector<std::string> parameters) {
  r.add({.scheme = std::move(scheme),
         .caps = caps,
         .primitives = redis::redis_primitives,
         .scope = lock_scope::network,
         .example_uri = std::move(example_uri),
         .summary = std::move(summary),
         .parameters = std::move(parameters),
         .open = [mode](const uri& u, const lock_options& d) {
           return std::make_shared<redis::redis_backend>(u, d, mode);
         }});
}

}  // namespace

void register_redis(registry& r) {
  const std::vector<std::string> params{"connect_timeout", "command_timeout",    "pool_size",    "prefix",
                                        "client_id",       "wait_after_restart", "min_replicas", "replica_timeout"};
  auto fair_params = params;
  fair_params.emplace_back("fair_wait");
  add_layout(r, "redis", redis::mode::simple, redis::redis_caps, "redis://[user:password@]127.0.0.1:6379/0?ttl=30s",
             "SET NX PX + fencing counter (INCR raised to the server clock) in one script, "
             "compare-and-delete unlock; redis-py Lock layout",
             params);
  add_layout(r, "redis+reentrant", redis::mode::reentrant, redis::redis_reentrant_caps,
             "redis+reentrant://127.0.0.1:6379?ttl=30s&client_id=<uuid>",
             "Redisson RLock/RFencedLock layout: hash of owner -> count, unlock published on its channel", params);
  add_layout(
      r, "redis+fair", redis::mode::fair, redis::redis_fair_caps, "redis+fair://127.0.0.1:6379?ttl=30s&fair_wait=5m",
      "Redisson RFairLock layout: FIFO queue list + timeout zset, each waiter woken on its own channel", fair_params);
  // The same three layouts on two other deployments: with the master found through Redis Sentinel
  // (sentinel.hpp), and on a Redis Cluster, each name on the master of its slot (cluster.hpp).
  struct deployment {
    const char* example_hosts;                // the example URI after the scheme
    const char* summary;                      // after the layout's name
    std::vector<std::string> own_parameters;  // beyond the layout's
  };
  const deployment sentinel{"://[user:password@]s1:26379,s2:26379,s3:26379/mymaster?ttl=30s",
                            "'s layout on the master the sentinels name (ROLE-checked), following failovers "
                            "(+switch-master, READONLY); min_replicas=N makes a grant wait for N replicas",
                            {"db", "sentinel_user", "sentinel_password"}};
  const deployment cluster{"://[user:password@]n1:6379,n2:6379,n3:6379?ttl=30s",
                           "'s layout on the master of each name's hash slot (CLUSTER SLOTS, MOVED and ASK followed; "
                           "every key of a lock in one slot, as Redisson places them)",
                           {"pubsub"}};  // auto | sharded | classic
  struct deployed_layout {
    const char* scheme;
    redis::mode mode;
    capabilities caps;
    const char* layout;
    const deployment& on;
  };
  const deployed_layout deployed_layouts[] = {
      {"redis+sentinel", redis::mode::simple, redis::redis_sentinel_caps, "redis://", sentinel},
      {"redis+reentrant+sentinel", redis::mode::reentrant, redis::redis_reentrant_sentinel_caps, "redis+reentrant://",
       sentinel},
      {"redis+fair+sentinel", redis::mode::fair, redis::redis_fair_sentinel_caps, "redis+fair://", sentinel},
      {"redis+cluster", redis::mode::simple, redis::redis_cluster_caps, "redis://", cluster},
      {"redis+reentrant+cluster", redis::mode::reentrant, redis::redis_reentrant_cluster_caps, "redis+reentrant://",
       cluster},
      {"redis+fair+cluster", redis::mode::fair, redis::redis_fair_cluster_caps, "redis+fair://", cluster},
  };
  for (const auto& v : deployed_layouts) {
    auto p = v.mode == redis::mode::fair ? fair_params : params;
    p.insert(p.end(), v.on.own_parameters.begin(), v.on.own_parameters.end());
    add_layout(r, v.scheme, v.mode, v.caps, std::string(v.scheme) + v.on.example_hosts,
               std::string(v.layout) + v.on.summary, std::move(p));
  }
  r.add({.scheme = "redlock",
         .caps = redis::redlock_caps,
         .scope = lock_scope::network,
         .example_uri = "redlock://h1:6379,h2:6379,h3:6379?ttl=30s",
         .summary = "Redlock: SET NX PX on N independent masters in parallel, majority + validity; no fencing",
         .parameters = {"connect_timeout", "command_timeout", "pool_size", "prefix", "wait_after_restart"},
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<redis::redlock_backend>(u, d); }});
  // The well-known broken recipes, refused unless the URI says unsafe=true (unsafe.hpp).
  struct unsafe_scheme {
    const char* scheme;
    redis::unsafe_strategy strategy;
    capabilities caps;
    const char* summary;
    const char* failure;
    bool two_commands;  // accepts unsafe_pause_between (the test hook between the two commands)
  };
  static const unsafe_scheme unsafe_schemes[] = {
      {"redis+unsafe-setnx-expire", redis::unsafe_strategy::setnx_expire, redis::redis_unsafe_setnx_expire_caps,
       "UNSAFE: SETNX then EXPIRE as two commands, release by plain DEL; no expiry guarantee, fencing, renewal or "
       "lost notification",
       "a holder dying between SETNX and EXPIRE leaves the lock held forever", true},
      {"redis+unsafe-getset", redis::unsafe_strategy::getset, redis::redis_unsafe_getset_caps,
       "UNSAFE: SETNX with the expiry (client wall clock) as the value, GET + GETSET takeover, release by DEL if "
       "the client's clock says in time; no fencing, renewal or lost notification",
       "a client whose clock is ahead takes over a live lock; a losing GETSET rewrites the holder's expiry", false},
      {"redis+unsafe-del", redis::unsafe_strategy::del, redis::redis_unsafe_del_caps,
       "UNSAFE: SET NX PX, release by plain DEL without an owner check; no fencing, renewal or lost notification",
       "a holder whose ttl ran out deletes its successor's lock at release", false},
      {"redis+unsafe-incr", redis::unsafe_strategy::incr, redis::redis_unsafe_incr_caps,
       "UNSAFE: INCR == 1 wins, then EXPIRE as a second command, release by plain DEL; no expiry guarantee, "
       "fencing, renewal or lost notification",
       "a holder dying between INCR and EXPIRE leaves the lock held forever", true},
  };
  for (const auto& v : unsafe_schemes) {
    std::vector<std::string> unsafe_params{"connect_timeout", "command_timeout", "pool_size", "prefix"};
    if (v.two_commands) unsafe_params.emplace_back("unsafe_pause_between");
    r.add({.scheme = v.scheme,
           .caps = v.caps,
           .scope = lock_scope::network,
           .example_uri = std::string(v.scheme) + "://127.0.0.1:6379?ttl=30s&unsafe=true",
           .summary = v.summary,
           .parameters = std::move(unsafe_params),
           .unsafe_because = std::string(v.failure) + "; use redis:// instead",
           .open = [strategy = v.strategy](const uri& u, const lock_options& d) {
             return redis::open_unsafe(u, d, strategy);
           }});
  }
}

}  // namespace dlock
