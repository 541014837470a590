#pragma once
// What each scheme of the redis folder declares: the only place these sets are written. register.cpp
// puts them in the registry and each backend passes its own to dlock::backend, so the two cannot differ.
#include "dlock/capabilities.hpp"

namespace dlock::redis {

// The mutex of every layout on one server: blocking (a waiter is woken by the release's publish),
// expiring (PX ttl on the server clock), renewable (owner-checked PEXPIRE), fencing (INCR counter
// raised to the server clock), lost_notification (the watchdog's renewal, and a check of every
// held key after a reconnect).
inline constexpr capabilities redis_mutex_caps{capability::blocking, capability::expiring, capability::renewable,
                                               capability::fencing, capability::lost_notification};
// redis://: and atomic_set, one script takes a whole multi_lock set or none of it.
inline constexpr capabilities redis_caps = redis_mutex_caps.with(capability::atomic_set);
// redis+reentrant://: Redisson's hash of owner -> count adds reentrancy.
inline constexpr capabilities redis_reentrant_caps = redis_mutex_caps.with(capability::reentrant);
// redis+fair://: Redisson's FIFO queue adds arrival order.
inline constexpr capabilities redis_fair_caps = redis_reentrant_caps.with(capability::fair);

// The reader-writer lock and the semaphore of redis://, redis+reentrant:// and redis+fair:// (one
// implementation, Redisson's RReadWriteLock and RPermitExpirableSemaphore layouts): blocking (a
// release publishes, waiters are woken), expiring (a read hold's timeout key and the hash's PX, a
// permit's expiry score, on the server clock), renewable, fencing (every grant INCRs a counter
// key of dlock's own, raised to the server clock as the mutex's), lost_notification (the
// watchdog's renewal). Not fair (no queue: whoever tries after a release gets in). The reader-writer
// lock is writer_preferred among dlock's clients: a waiting writer's entry in a set of dlock's own
// holds back dlock's new readers (Redisson's readers do not read it: README).
inline constexpr capabilities redis_shared_caps{capability::blocking, capability::expiring, capability::renewable,
                                                capability::fencing, capability::lost_notification};
inline constexpr primitive_caps redis_primitives{redis_shared_caps.with(capability::writer_preferred),
                                                 redis_shared_caps};

// The Sentinel schemes: the same layouts on the master the sentinels name, so the same promises (a
// failover can lose a grant, as replication is asynchronous: see the README's "Redis Sentinel").
inline constexpr capabilities redis_sentinel_caps = redis_caps;
inline constexpr capabilities redis_reentrant_sentinel_caps = redis_reentrant_caps;
inline constexpr capabilities redis_fair_sentinel_caps = redis_fair_caps;

// The Cluster schemes: the same layouts on the master of each name's slot (all of a lock's keys
// share it through their hash tag), so the same promises; a master's failover can lose a grant as
// Sentinel's can (README's "Redis Cluster").
// A set is taken in one script only where all its keys share a slot (names with one hash tag), so
// redis+cluster:// does not promise atomic_set.
inline constexpr capabilities redis_cluster_caps = redis_mutex_caps;
inline constexpr capabilities redis_reentrant_cluster_caps = redis_reentrant_caps;
inline constexpr capabilities redis_fair_cluster_caps = redis_fair_caps;

// redlock://: no fencing (each master has its own counter, and no construction over them is
// monotonic across failovers); not blocking (waiters poll with jittered backoff, Redlock's random retry).
inline constexpr capabilities redlock_caps{capability::expiring, capability::renewable, capability::lost_notification};
// redlock:// offers neither primitive: a count voted over independent masters is not safe (a
// semaphore of 2 on 3 masters admits 3 holders with every master behaving: README), and a voted
// reader-writer lock, as safe as Redlock's mutex at best, was not built.

// The UNSAFE schemes (unsafe.hpp): no fencing, renewal or lost notification. The two that set the
// expiry in a second command cannot promise it (a holder dying in between holds forever).
inline constexpr capabilities redis_unsafe_setnx_expire_caps{};
inline constexpr capabilities redis_unsafe_getset_caps{capability::expiring};
inline constexpr capabilities redis_unsafe_del_caps{capability::expiring};
inline constexpr capabilities redis_unsafe_incr_caps{};

}  // namespace dlock::redis
