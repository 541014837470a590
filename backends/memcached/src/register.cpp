// memcached://host:port[,host:port...]?ttl=30s[&prefix=dlock:&pool_size=16&connect_timeout=2s&command_timeout=2s&restart_delay=on]
#include "memcached_lock.hpp"
#include "unsafe_delete.hpp"

namespace dlock {

void register_memcached(registry& r) {
  r.add({.scheme = "memcached",
         .caps = memcached::declared_caps(),
         .scope = lock_scope::network,
         .example_uri = "memcached://127.0.0.1:11211[,host:port...]?ttl=30s",
         .summary = "add with a ttl, gets + CAS-guarded delete/renew, incr fencing seeded from the server clock; a restarted server grants after ttl; no replication",
         .parameters = {"prefix", "pool_size", "connect_timeout", "command_timeout", "restart_delay"},
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<memcached::memcached_backend>(u, d); }});
  // The well-known add + plain delete lock, refused unless the URI says unsafe=true.
  memcached::register_unsafe_delete(r);
}

}  // namespace dlock
