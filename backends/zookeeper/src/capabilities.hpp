#pragma once
// What zookeeper:// declares: the only place this set is written. register.cpp puts it in the
// registry, and zookeeper_backend and zk_lock pass it to the core.
#include "dlock/capabilities.hpp"

namespace dlock::zookeeper {

// blocking (the server orders the waiters; we wait on a watch), fair (arrival order), expiring
// (the session), reentrant (per lock object), fencing (czxid of our node), lost_notification
// (session expiry, node deletion, optionally a suspended connection). Not renewable: the session
// keeps the node alive, there is no per-lock ttl.
inline constexpr capabilities zookeeper_caps{capability::blocking,  capability::fair,    capability::expiring,
                                             capability::reentrant, capability::fencing, capability::lost_notification};

// The reader-writer lock and the semaphore (Curator's InterProcessReadWriteLock and
// InterProcessSemaphoreV2 layouts): blocking (watches), fair (the server's sequence order: the
// read/write queue itself, the semaphore's internal mutex), expiring (the session), fencing (the
// czxid of the grant's node; a semaphore grant's newest lease node), lost_notification (as the
// mutex). The reader-writer lock is writer_preferred: a reader queued behind a waiting writer's
// node waits for it. Neither is reentrant (a second acquire is a second node) nor renewable.
inline constexpr capabilities zookeeper_shared_caps{capability::blocking, capability::fair, capability::expiring,
                                                    capability::fencing, capability::lost_notification};
inline constexpr primitive_caps zookeeper_primitives{zookeeper_shared_caps.with(capability::writer_preferred),
                                                     zookeeper_shared_caps};

}  // namespace dlock::zookeeper
