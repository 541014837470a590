#pragma once
// What zookeeper:// declares: the only place this set is written. register.cpp puts it in the
// registry, and zookeeper_backend and zk_lock pass it to the core.
#include "dlock/capabilities.hpp"

namespace dlock::zookeeper {

// blocking (the server orders the waiters; we wait on a watch), fair (arrival order), expiring
// (the session), reentrant (per lock object), fencing (czxid of our node), lost_notification
// (session expiry, node deletion, optionally a suspended connection). Not renewable: the session
// keeps the node alive, there is no per-lock ttl.
inline constexpr capabilities zookeeper_caps{capability::blocking, capability::fair, capability::expiring,
                                             capability::reentrant, capability::fencing, capability::lost_notification};

}  // namespace dlock::zookeeper
