#pragma once
// The reader-writer lock and the semaphore of redis://, redis+reentrant:// and redis+fair://: one
// implementation for the three schemes, in Redisson's RReadWriteLock and RPermitExpirableSemaphore
// layouts (shared_scripts.hpp). All of them, and the mutex, live at the name's raw key: one name
// is one lock (the mutex counts as a writer), and a semaphore never shares its name with either.
#include <cstdint>
#include <memory>
#include <string>

#include "backend_state.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::redis {

// The renewal batch of the leases these make (backend_state::primitive_renewals).
std::unique_ptr<spi::renewal_batch> make_grant_renewals(backend_state& s);

std::unique_ptr<rw_lock> make_redis_rw_lock(std::shared_ptr<backend_state> s, const std::string& name,
                                            capabilities caps, lock_options options);
std::unique_ptr<semaphore> make_redis_semaphore(std::shared_ptr<backend_state> s, const std::string& name,
                                                std::uint32_t max_count, capabilities caps, lock_options options);

}  // namespace dlock::redis
