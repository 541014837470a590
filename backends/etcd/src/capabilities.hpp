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
inline constexpr capabilities etcd_caps{capability::blocking, capability::expiring, capability::renewable,
                                        capability::fencing, capability::lost_notification};

}  // namespace dlock::etcd
