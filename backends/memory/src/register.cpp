// memory://[namespace]: the only coupling between this backend and the build.
#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "memory_backend.hpp"

namespace dlock {

void register_memory(registry& r) {
  r.add({.scheme = "memory",
         .caps = memory::memory_caps,
         .primitives = memory::memory_primitives,
         .scope = lock_scope::process,
         .example_uri = "memory://?ttl=30s",
         .summary = "in-process lock table per namespace: reentrant, FIFO hand-off, expiry on the steady clock; "
                    "reader-writer locks and semaphores as FIFO pools of units",
         .parameters = {},
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           return std::make_shared<memory::memory_backend>(u, defaults);
         }});
}

}  // namespace dlock
