// file:///dir: the only coupling between this backend and the build.
#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "file_backend.hpp"

namespace dlock {

void register_file(registry& r) {
  r.add({.scheme = "file",
         .caps = file::file_caps,
         .primitives = file::file_primitives,
         .scope = lock_scope::host,
         .example_uri = "file:///var/lock/myapp",
         .summary =
             "one lock file per name, flock(LOCK_EX|LOCK_NB) per lease, fencing counter in the file; reader-writer "
             "locks (LOCK_SH/LOCK_EX behind a writer turnstile) and semaphores (one slot file per permit)",
         .parameters = {},
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           return std::make_shared<file::file_backend>(u, defaults);
         }});
}

}  // namespace dlock
