#pragma once
// The Lua scripts of the redis backends, run by EVALSHA. Key and argument layouts:
//   simple    : redis-py's redis.lock.Lock layout (STRING key = name, value = token).
//   reentrant : Redisson's RLock / RFencedLock layout (anchors.md section c.1).
#include "connection.hpp"

namespace dlock::redis::scripts {

// KEYS = [lock, fencing counter]  ARGV = [token, ttl ms]  -> {1, fencing token} | {0, pttl}
inline const script simple_acquire{
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return {1, redis.call('incr', KEYS[2])} end "
    "return {0, redis.call('pttl', KEYS[1])}"};

// KEYS = [lock, release channel]  ARGV = [token]  -> 1 released | 0 not ours (redis-py's release)
inline const script simple_release{
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], '0'); return 1 end return 0"};

// KEYS = [lock]  ARGV = [token, ttl ms]  -> 1 extended | 0 not ours (redis-py's reacquire)
inline const script simple_renew{
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"};

// Redisson RFencedLock acquire. KEYS = [name, redisson_lock_token:{name}]  ARGV = [ttl ms, owner field]
//   -> {-1, fencing token} acquired | {pttl, -1} held by someone else
inline const script reentrant_acquire{
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};"};

// Redisson RLock unlock (without the unlock latch, which only makes Java's retried unlock idempotent).
// KEYS = [name, redisson_lock__channel:{name}]  ARGV = ['0', ttl ms, owner field, 'publish']
//   -> nil not ours | 0 still held re-entrantly | 1 released and published
inline const script reentrant_release{
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end;"};

// Redisson's renewal (LockTask) for one key. KEYS = [name]  ARGV = [ttl ms, owner field] -> 1 | 0
inline const script reentrant_renew{
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return 1; end; return 0;"};

}  // namespace dlock::redis::scripts
