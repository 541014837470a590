// zookeeper://h1:2181[,h2:2181...]/root
//   ?session_timeout=10s[&connect_timeout=10s&digest=user:pw&acl=creator|open&on_suspended=keep|lose]
#include "capabilities.hpp"
#include "zk_backend.hpp"

namespace dlock {

void register_zookeeper(registry& r) {
  r.add(
      {.scheme = "zookeeper",
       .caps = zookeeper::zookeeper_caps,
       .primitives = zookeeper::zookeeper_primitives,
       .scope = lock_scope::network,
       .example_uri = "zookeeper://[user:password@]h1:2181,h2:2181,h3:2181/dlock?session_timeout=10s",
       .summary =
           "Curator InterProcessMutex layout: ephemeral sequential nodes, watch the predecessor, czxid fencing; "
           "InterProcessReadWriteLock and InterProcessSemaphoreV2 layouts for the reader-writer lock and the semaphore",
       .parameters = {"session_timeout", "connect_timeout", "digest", "acl", "on_suspended"},
       .ttl_set_by = "the session_timeout parameter: a grant lives as long as its ZooKeeper session",
       .open = [](const uri& u, const lock_options& d) {
         return std::make_shared<zookeeper::zookeeper_backend>(u, d);
       }});
}

}  // namespace dlock
