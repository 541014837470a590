#pragma once
// What each scheme of the memcached folder declares: the only place these sets are written.
// register.cpp puts them in the registry and each backend passes its own to dlock::backend.
#include "dlock/capabilities.hpp"

namespace dlock::memcached {

// memcached://: expiring (the item's ttl), renewable (CAS-guarded re-store), fencing (a fencing
// base plus the grant's CAS unique; the base re-created from the server's clock when a restart or
// an eviction lost it),
// lost_notification (the core watchdog's CAS-guarded renewal finds the item gone or replaced
// within ttl/3; there is no server push). Not blocking, not fair, not reentrant.
inline constexpr capabilities memcached_caps{capability::expiring, capability::renewable, capability::fencing,
                                             capability::lost_notification};

// Beside the mutex: a semaphore of N slot items, each taken, renewed and released exactly as the
// mutex's item (memcached_semaphore.hpp), so the same set. No reader-writer lock: a writer would
// have to see every live reader atomically, which memcached offers no safe way to do (README).
inline constexpr primitive_caps memcached_primitives{std::nullopt, memcached_caps};

// memcached+unsafe-delete:// (UNSAFE, unsafe_delete.hpp): only the item's ttl; a plain delete
// releases, so no fencing, renewal or lost notification.
inline constexpr capabilities memcached_unsafe_delete_caps{capability::expiring};

}  // namespace dlock::memcached
