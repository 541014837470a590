#pragma once
// What each postgres+* scheme declares, in one place: register.cpp puts these in the registry and
// each backend reports the same value from capabilities().
#include "dlock/capabilities.hpp"

namespace dlock::pg {

// postgres+index: reentrant through owner + hold count; fair only with fair=true (the strategy
// adds it then); renewable (the row's expiry moves); lost_notification through failed renewals;
// atomic_set: a multi_lock set is one transaction (without fair=true, which takes it away).
inline constexpr capabilities postgres_index_caps{capability::reentrant,         capability::expiring,
                                                  capability::renewable,         capability::fencing,
                                                  capability::lost_notification, capability::atomic_set};

// postgres+forupdate: the server queues waiters on the row lock and frees it with the session
// (the session monitor fires lost); no ttl on the server, nothing to renew.
inline constexpr capabilities postgres_forupdate_caps{capability::blocking, capability::expiring, capability::fencing,
                                                      capability::lost_notification};

// postgres+version: the version is the fencing token; renew moves the grant's expiry.
inline constexpr capabilities postgres_version_caps{capability::expiring, capability::renewable, capability::fencing,
                                                    capability::lost_notification};

// postgres+advisory: pg_advisory_lock queues waiters on the server; the lock is the session's
// (the session monitor fires lost); fencing from a sequence read in the granting statement.
inline constexpr capabilities postgres_advisory_caps{capability::blocking, capability::expiring, capability::fencing,
                                                     capability::lost_notification};

// postgres+advisory's reader-writer lock: pg_advisory_lock_shared / pg_advisory_lock, waits
// blocked on the server, which queues a new shared request behind a waiting exclusive one
// (writer_preferred: postgres/advisory_primitives tests show it on the server and through dlock).
// Not fair: the server may grant out of order (a session that already holds locks a waiter
// wants goes ahead of it). The semaphore: slots taken with try-locks and polled (a wait for "any
// k of N" has no server-side queue), so not blocking; freed with the session; token per grant.
inline constexpr capabilities postgres_advisory_shared_caps{capability::expiring, capability::fencing,
                                                            capability::lost_notification};
inline constexpr primitive_caps postgres_advisory_primitives{
    postgres_advisory_shared_caps.with(capability::blocking).with(capability::writer_preferred),
    postgres_advisory_shared_caps};

}  // namespace dlock::pg
