// etcd://host:port[,host:port...][/prefix]?ttl=10s[&connect_timeout=2s&command_timeout=5s]
#include "capabilities.hpp"
#include "etcd_lock.hpp"

namespace dlock {

void register_etcd(registry& r) {
  r.add({.scheme = "etcd",
         .caps = etcd::etcd_caps,
         .primitives = etcd::etcd_primitives,
         .scope = lock_scope::network,
         .example_uri = "etcd://[user:password@]h1:2379,h2:2379,h3:2379?ttl=10s",
         .summary =
             "Go concurrency.Mutex layout (etcdctl lock): a lease per grant (ttl rounded up to whole seconds), "
             "key <name>/<lease hex> put in a txn, lowest create revision holds, each waiter watches its "
             "predecessor's deletion; create-revision fencing; v3 JSON gateway. Reader-writer lock in the layout of "
             "Go's recipe RWMutex (<name>/read/, <name>/write/), semaphore under <name>/semaphore/",
         .parameters = {"connect_timeout", "command_timeout"},
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<etcd::etcd_backend>(u, d); }});
}

}  // namespace dlock
