#pragma once
// What the etcd folder's scheme declares: the only place this set is written. register.cpp puts it
// in the registry and the backend passes it to dlock::backend.
#include "dlock/capabilities.hpp"

namespace dlock::etcd {

// etcd://: blocking (each waiter watches the deletion of its predecessor's key: one wake-up per
// release), expiring (an etcd lease per grant; its key goes when the lease expires), renewable (the
// lease's keep-alive), fencing (the key's create revision, from the cluster's one revision counter),
// lost_notification (the watchdog's keep-alive finds the lease or the key gone, or the validity,
// counted from the keep-alive's send time, runs out). Not declared fair: waiters are served in
// create-revision order, but a try never queues and overtakes them. Not reentrant.
inline constexpr capabilities etcd_lease_caps{capability::blocking, capability::expiring, capability::renewable,
                                              capability::fencing, capability::lost_notification};
// And atomic_set: one Txn takes a whole multi_lock set or none of it.
inline constexpr capabilities etcd_caps = etcd_lease_caps.with(capability::atomic_set);

// The reader-writer lock (Go's contrib recipe RWMutex layout) and the semaphore (layout.hpp): what
// the mutex declares, for the same reasons (one lease and one key per grant, in the same line;
// blocking: a waiter watches a deletion, the semaphore's any deletion among its keys). The
// reader-writer lock is writer_preferred: a waiting writer's key is in the line, and a reader
// created after it waits for it.
inline constexpr primitive_caps etcd_primitives{etcd_lease_caps.with(capability::writer_preferred), etcd_lease_caps};

}  // namespace dlock::etcd
