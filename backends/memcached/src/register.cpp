// memcached://host:port[,host:port...]
//   ?ttl=30s[&prefix=dlock:&pool_size=128&connect_timeout=2s&command_timeout=2s&restart_delay=on]
#include "capabilities.hpp"
#include "memcached_lock.hpp"
#include "unsafe_delete.hpp"

namespace dlock {

void register_memcached(registry& r) {
  r.add(
      {.scheme = "memcached",
       .caps = memcached::memcached_caps,
       .primitives = memcached::memcached_primitives,
       .scope = lock_scope::network,
       .example_uri = "memcached://127.0.0.1:11211[,host:port...]?ttl=30s",
       .summary =
           "add with a ttl, CAS-guarded delete/renew, fencing from the CAS unique over a base seeded from the server "
           "clock; a restarted server grants after ttl; no replication; semaphores as N slot items taken the same way",
       .parameters = {"prefix", "pool_size", "connect_timeout", "command_timeout", "restart_delay"},
       .open = [](const uri& u, const lock_options& d) {
         return std::make_shared<memcached::memcached_backend>(u, d);
       }});
  // The well-known add + plain delete lock, refused unless the URI says unsafe=true.
  r.add(
      {.scheme = "memcached+unsafe-delete",
       .caps = memcached::memcached_unsafe_delete_caps,
       .scope = lock_scope::network,
       .example_uri = "memcached+unsafe-delete://127.0.0.1:11211?ttl=30s&unsafe=true",
       .summary = "UNSAFE: add with a ttl, release by plain delete without an owner check; no fencing, renewal or "
                  "lost notification",
       .parameters = {"prefix", "pool_size", "connect_timeout", "command_timeout"},
       .unsafe_because = "a holder whose ttl ran out deletes its successor's lock at release; use memcached:// instead",
       .open = [](const uri& u, const lock_options& d) { return memcached::open_unsafe_delete(u, d); }});
}

}  // namespace dlock
