#pragma once
// What each mysql+* scheme declares, in one place: register.cpp puts these in the registry and
// each backend reports the same value from capabilities().
#include "dlock/capabilities.hpp"

namespace dlock::mysql {

// mysql+getlock. blocking: GET_LOCK(name, n) waits on the server. expiring: a dead holder's
// connection ends and frees the lock. renewable: renew is the liveness check that moves the
// lease's local validity and lets the watchdog notice a killed connection or a silent link, hence
// lost_notification. fencing: a sequence read in the granting statement. Not reentrant (each
// lease has its own connection, so a second acquire through the same object waits like anyone
// else), not fair (the server documents no order).
inline constexpr capabilities mysql_getlock_caps{capability::blocking, capability::expiring, capability::renewable,
                                                 capability::fencing, capability::lost_notification};

// mysql+getlock's semaphore: N GET_LOCK slots, a lease's permits held by its own connection.
// expiring: a dead holder's connection ends and frees its slots. renewable: the liveness check
// (the connection still holds every slot), hence lost_notification through the watchdog.
// fencing: NEXTVAL read in the statement that takes the last slot. Not blocking: GET_LOCK waits on
// one name, a permit is any of N (waiters poll), so not fair either. No reader-writer lock:
// GET_LOCK has only an exclusive mode (README).
inline constexpr primitive_caps mysql_getlock_primitives{
    std::nullopt,
    capabilities{capability::expiring, capability::renewable, capability::fencing, capability::lost_notification}};

// mysql+index. Not blocking (MySQL cannot notify: waiters poll with the core's jittered
// backoff); fair only with fair=true (the strategy adds it then). Reentrant through owner +
// hold_count. lost_notification through the watchdog's failed renewals. atomic_set: a multi_lock
// set is one transaction (without fair=true, which takes it away).
inline constexpr capabilities mysql_index_caps{capability::reentrant,         capability::expiring,
                                               capability::renewable,         capability::fencing,
                                               capability::lost_notification, capability::atomic_set};

// mysql+index's reader-writer lock and semaphore: holder rows that expire on the server clock
// (expiring), renew moves expires_at (renewable, and lost_notification through the watchdog's
// failed renewals), NEXTVAL of the mutex's fence sequence in the granting statement (fencing).
// Not blocking (waiters poll), not fair (no queue: whoever polls when units are free gets them).
// The reader-writer lock is writer_preferred: a waiting writer marks the pool's anchor row and
// readers do not enter while the mark is live (tests/primitives_test.cpp shows it).
inline constexpr capabilities mysql_index_shared_caps{capability::expiring, capability::renewable, capability::fencing,
                                                      capability::lost_notification};
inline constexpr primitive_caps mysql_index_primitives{mysql_index_shared_caps.with(capability::writer_preferred),
                                                       mysql_index_shared_caps};

// mysql+forupdate. The row lock is held by a transaction on a dedicated connection: the server
// queues waiters (innodb_lock_wait_timeout) and frees it when the connection dies (the session
// monitor notices and fires lost). No ttl on the server, so nothing to renew.
inline constexpr capabilities mysql_forupdate_caps{capability::blocking, capability::expiring, capability::fencing,
                                                   capability::lost_notification};

// mysql+version.
inline constexpr capabilities mysql_version_caps{capability::expiring, capability::renewable, capability::fencing,
                                                 capability::lost_notification};

}  // namespace dlock::mysql
