#pragma once
// What file:// declares: the only place this set is written. register.cpp puts it in the registry
// and file_backend passes it to dlock::backend.
#include "dlock/capabilities.hpp"

namespace dlock::file {

// expiring: the kernel drops a flock when its holder dies (no ttl while it lives). fencing: the
// counter in the lock file (name_lock.hpp). Not reentrant (flock is per open file description), not fair and not
// blocking (a waiter sleeps in the kernel until a release, lock_file_watch.hpp, but the kernel
// queues nobody: across processes whoever tries first wins; the core's line is per process), not
// renewable (nothing to renew), no lost notification (a held flock cannot be taken away, and
// nothing tells the holder if its lock file is deleted or replaced).
inline constexpr capabilities file_caps{capability::expiring, capability::fencing};

// The reader-writer lock and the semaphore (shared_files.hpp): expiring and fencing as the mutex
// (the kernel frees a dead holder's flocks; every grant, reads included, takes the next value of
// a counter, the reader-writer lock's the same as the mutex's of its name). The reader-writer
// lock is writer_preferred: a waiting writer (or mutex) holds the turnstile file exclusively, so
// readers arriving after it stay out (Linux flock alone would let a stream of LOCK_SH starve a
// LOCK_EX). Not blocking, not fair: the kernel queues nobody (readers and semaphore waiters poll;
// a writer holding the turnstile sleeps on inotify until the lock file is closed). Not renewable,
// no lost notification, as the mutex.
inline constexpr capabilities file_shared_caps{capability::expiring, capability::fencing};
inline constexpr primitive_caps file_primitives{file_shared_caps.with(capability::writer_preferred), file_shared_caps};

}  // namespace dlock::file
