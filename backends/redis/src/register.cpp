// The redis family: one folder because the schemes share the connection pool, the subscriber and
// the scripts; each scheme has its own honest capability set.
#include "redis_backend.hpp"
#include "redlock.hpp"
#include "unsafe.hpp"

namespace dlock {

void register_redis(registry& r) {
  const std::vector<std::string> params{"connect_timeout", "command_timeout", "pool_size", "prefix", "client_id",
                                        "wait_after_restart"};
  r.add({.scheme = "redis",
         .caps = redis::caps_of(redis::mode::simple),
         .scope = lock_scope::network,
         .example_uri = "redis://[user:password@]127.0.0.1:6379/0?ttl=30s",
         .summary = "SET NX PX + fencing counter (INCR raised to the server clock) in one script, "
                    "compare-and-delete unlock; redis-py Lock layout",
         .parameters = params,
         .open = [](const uri& u, const lock_options& d) {
           return std::make_shared<redis::redis_backend>(u, d, redis::mode::simple);
         }});
  r.add({.scheme = "redis+reentrant",
         .caps = redis::caps_of(redis::mode::reentrant),
         .scope = lock_scope::network,
         .example_uri = "redis+reentrant://127.0.0.1:6379?ttl=30s&client_id=<uuid>",
         .summary = "Redisson RLock/RFencedLock layout: hash of owner -> count, unlock published on its channel",
         .parameters = params,
         .open = [](const uri& u, const lock_options& d) {
           return std::make_shared<redis::redis_backend>(u, d, redis::mode::reentrant);
         }});
  auto fair_params = params;
  fair_params.push_back("fair_wait");
  r.add({.scheme = "redis+fair",
         .caps = redis::caps_of(redis::mode::fair),
         .scope = lock_scope::network,
         .example_uri = "redis+fair://127.0.0.1:6379?ttl=30s&fair_wait=5m",
         .summary = "Redisson RFairLock layout: FIFO queue list + timeout zset, each waiter woken on its own channel",
         .parameters = fair_params,
         .open = [](const uri& u, const lock_options& d) {
           return std::make_shared<redis::redis_backend>(u, d, redis::mode::fair);
         }});
  r.add({.scheme = "redlock",
         .caps = redis::redlock_backend::declared_caps(),
         .scope = lock_scope::network,
         .example_uri = "redlock://h1:6379,h2:6379,h3:6379?ttl=30s",
         .summary = "Redlock: SET NX PX on N independent masters in parallel, majority + validity; no fencing",
         .parameters = {"connect_timeout", "command_timeout", "pool_size", "prefix", "wait_after_restart"},
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<redis::redlock_backend>(u, d); }});
  // The well-known broken recipes, refused unless the URI says unsafe=true (unsafe.hpp).
  redis::register_unsafe(r);
}

}  // namespace dlock
