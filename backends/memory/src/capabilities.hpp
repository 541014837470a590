#pragma once
// What memory:// declares: the only place this set is written. register.cpp puts it in the
// registry and memory_backend passes it to dlock::backend.
#include "dlock/capabilities.hpp"

namespace dlock::memory {

// Every capability: the lock table is in this process, so it can queue waiters in arrival order
// (blocking, fair), count re-entries, expire on the steady clock, renew, count grants, tell a
// holder at once when its grant is gone, and take a whole multi_lock set under its one mutex.
inline constexpr capabilities memory_caps{capability::reentrant,         capability::fair,      capability::blocking,
                                          capability::expiring,          capability::renewable, capability::fencing,
                                          capability::lost_notification, capability::atomic_set};

// The reader-writer lock and the semaphore: a FIFO pool of units in the same process (memory_table),
// so both queue waiters in arrival order, and a waiting writer (or mutex) holds back the readers
// behind it.
// Not reentrant: a second read through the same object is a second reader.
inline constexpr capabilities memory_shared_caps{capability::fair,     capability::blocking,
                                                 capability::expiring, capability::renewable,
                                                 capability::fencing,  capability::lost_notification};
inline constexpr primitive_caps memory_primitives{memory_shared_caps.with(capability::writer_preferred),
                                                  memory_shared_caps};

}  // namespace dlock::memory
