#pragma once
// The server keys of a name, for the mutex of each layout, the reader-writer lock and the
// semaphore: Redisson's derived names, hash-tagged by the name's raw key (prefix + name), so that
// on a cluster every key of one name is in one slot.
#include <string>
#include <string_view>

#include "redis_settings.hpp"

namespace dlock::redis {

// The server keys of one lock (key = prefix + name). simple: redis-py's layout at the key;
// reentrant and fair: Redisson's hash (only fair uses queue and timeout). The derived keys are
// Redisson's for every layout, hash-tagged by the key: the fencing counter is RFencedLock's
// redisson_lock_token:{key}, which the name's reader-writer lock counts with too (one sequence per
// name), and releases publish on redisson_lock__channel:{key} (fair: per waiter, the lock adds the
// owner) and on the reader-writer lock's channel rw_channel, whose waiters the mutex holds back.
// `waiting` is the reader-writer lock's waiting-writers set (a waiting mutex holds back readers),
// `permits` the semaphore's permit zset of the same name (what a conflict reports).
struct key_names {
  std::string key, fence, channel, queue, timeout, waiting, permits, rw_channel;
};
key_names keys_for(std::string_view prefix, mode m, std::string_view name);

// Redisson's "<client uuid>:<thread id>" owner field, with the lock object's owner in place of the
// thread (a 63-bit hash of it): identity per owner (lock object), never per calling thread.
std::string redisson_owner_field(const settings& cfg, std::string_view owner);

// Redisson's hash-tagged derived names: prefixName(p, n) = p + ":{" + n + "}" (braces omitted
// when n already contains '{').
std::string redisson_prefix_name(std::string_view prefix, std::string_view name);

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
