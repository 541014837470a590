#pragma once
// The reader-writer lock and the semaphore of redis://, redis+reentrant:// and redis+fair://: one
// implementation for the three schemes, in Redisson's RReadWriteLock and RPermitExpirableSemaphore
// layouts (shared_scripts.hpp). All of them, and the mutex, live at the name's raw key: one name
// is one lock (the mutex counts as a writer), and a semaphore never shares its name with either.
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "redis_backend.hpp"

namespace dlock::redis {

// The renewal batch of the leases these make (shared::primitive_renewals).
std::unique_ptr<spi::renewal_batch> make_grant_renewals(shared& s);

std::unique_ptr<rw_lock> make_redis_rw_lock(std::shared_ptr<shared> s, const std::string& name, capabilities caps,
                                            lock_options options);
std::unique_ptr<semaphore> make_redis_semaphore(std::shared_ptr<shared> s, const std::string& name,
                                                std::uint32_t max_count, capabilities caps, lock_options options);

// Redisson's suffixName(n, s): "{" + n + "}:" + s, or n + ":" + s when n already contains '{'.
std::string redisson_suffix_name(std::string_view name, std::string_view suffix);

// The server keys of one reader-writer lock (key = prefix + name) for the holder field `field`,
// with those of the name's mutex and semaphore that its scripts read or publish to.
struct rw_key_names {
  std::string hash, channel, token, timeout_prefix, holders_prefix, waiting, permits, mutex_channel, mutex_queue;
};
rw_key_names rw_keys_for(std::string_view key, std::string_view field);

// The server keys of one semaphore (key = prefix + name).
struct semaphore_key_names {
  std::string count, timeouts, channel, token;
};
semaphore_key_names semaphore_keys_for(std::string_view key);

}  // namespace dlock::redis
