#pragma once
// The Lua scripts of the redis backends, run by EVALSHA. Key and argument layouts:
//   simple    : redis-py's redis.lock.Lock layout (STRING key = name, value = token).
//   reentrant : Redisson's RLock / RFencedLock layout (https://github.com/redisson/redisson/blob/master/redisson/src/main/java/org/redisson/RedissonLock.java).
//   fair      : Redisson's RFairLock layout (queue list + timeout zset).
#include "connection.hpp"

namespace dlock::redis::scripts {

// The next fencing token of a counter key: INCR, raised to the server clock in microseconds
// (TIME) when the counter is behind it, and written back. A counter lost with the data (restart
// without persistence, FLUSHALL, eviction) therefore starts again above every token handed out
// before, as long as the server clock did not step back and grants stayed under one per
// microsecond. Microseconds since 1970 (~1.8e15) are exact in Lua's doubles (below 2^53); '%.0f'
// writes them without an exponent. Redisson's RFencedLock INCRs the same key and keeps counting.
#define DLOCK_NEXT_FENCING_TOKEN                                                                   \
  "local function next_fencing_token(counter) local now = redis.call('time'); "                    \
  "now = tonumber(now[1]) * 1000000 + tonumber(now[2]); "                                          \
  "local token = redis.call('incr', counter); "                                                    \
  "if token < now then token = now; redis.call('set', counter, string.format('%.0f', now)); end; " \
  "return token; end; "

// KEYS = [lock, fencing counter]  ARGV = [token, ttl ms]  -> {1, fencing token} | {0, pttl}
inline const script simple_acquire{
    DLOCK_NEXT_FENCING_TOKEN
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return {1, next_fencing_token(KEYS[2])} end "
    "return {0, redis.call('pttl', KEYS[1])}"};

// KEYS = [lock, release channel]  ARGV = [token]  -> 1 released | 0 not ours (redis-py's release)
inline const script simple_release{
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], '0'); return 1 end return 0"};

// KEYS = [lock]  ARGV = [token, ttl ms]  -> 1 extended | 0 not ours (redis-py's reacquire)
inline const script simple_renew{
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"};

// Redisson RFencedLock acquire (its INCR raised to the clock, above). KEYS = [name, redisson_lock_token:{name}]  ARGV = [ttl ms, owner field]
//   -> {-1, fencing token} acquired | {pttl, -1} held by someone else
inline const script reentrant_acquire{
    DLOCK_NEXT_FENCING_TOKEN
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = next_fencing_token(KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
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

// Redisson RFairLock (https://github.com/redisson/redisson/blob/master/redisson/src/main/java/org/redisson/RedissonFairLock.java). Every fair script first drops stale
// waiters whose timeout score has passed, exactly as Redisson's do.
#define DLOCK_REDISSON_FAIR_SWEEP                                           \
  DLOCK_NEXT_FENCING_TOKEN                                                  \
  "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); " \
  "if firstThreadId2 == false then break; end; "                            \
  "local timeout = redis.call('zscore', KEYS[3], firstThreadId2); "         \
  "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "    \
  "redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end; "

// Take it now or not at all (Redisson's tryLock() branch, plus the RFencedLock token INCR).
// KEYS = [name, queue, timeout zset, redisson_lock_token:{name}]  ARGV = [ttl, owner field, wait ms, now ms]
//   -> {-1, fencing token} | {pttl, -1}
inline const script fair_try{
    DLOCK_REDISSON_FAIR_SWEEP
    "if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "
    "redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2]); "
    "local keys = redis.call('zrange', KEYS[3], 0, -1); "
    "for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end; "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, next_fencing_token(KEYS[4])}; end; "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, next_fencing_token(KEYS[4])}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};"};

// Take it or join the queue (Redisson's blocking branch, plus the token INCR). Same KEYS/ARGV.
//   -> {-1, fencing token} | {ms to wait, -1}
inline const script fair_enqueue{
    DLOCK_REDISSON_FAIR_SWEEP
    "if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "
    "redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2]); "
    "local keys = redis.call('zrange', KEYS[3], 0, -1); "
    "for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end; "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, next_fencing_token(KEYS[4])}; end; "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, next_fencing_token(KEYS[4])}; end; "
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]); "
    "if timeout ~= false then local ttl = redis.call('pttl', KEYS[1]); return {math.max(0, ttl), -1}; end; "
    "local lastThreadId = redis.call('lindex', KEYS[2], -1); local ttl; "
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]); "
    "else ttl = redis.call('pttl', KEYS[1]); end; "
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]); "
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]); end; "
    "return {ttl, -1};"};

// Redisson's fair unlock: decrement; at zero DEL and publish '0' to the NEXT waiter's own channel
// (redisson_lock__channel:{name}:<next owner>). Deviation: a missing lock returns nil (not_owner)
// instead of Redisson's 1, after waking the next waiter the same way.
// KEYS = [name, queue, timeout zset, redisson_lock__channel:{name}]  ARGV = ['0', ttl, owner, now, 'publish']
inline const script fair_release{
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); "
    "if firstThreadId2 == false then break; end; "
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2); "
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; "
    "redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1;"};

// Redisson's acquireFailed: leave the queue, giving the wait time back to everyone behind us; if
// the lock is free, wake the new head so it does not wait for a message that never comes.
// KEYS = [queue, timeout zset, name, redisson_lock__channel:{name}]  ARGV = [owner, wait ms, 'publish']
inline const script fair_cancel{
    "local queue = redis.call('lrange', KEYS[1], 0, -1); local i = 1; "
    "while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1; end; i = i + 1; "
    "while i <= #queue do redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]); i = i + 1; end; "
    "redis.call('zrem', KEYS[2], ARGV[1]); redis.call('lrem', KEYS[1], 0, ARGV[1]); "
    "if redis.call('exists', KEYS[3]) == 0 then local head = redis.call('lindex', KEYS[1], 0); "
    "if head ~= false then redis.call(ARGV[3], KEYS[4] .. ':' .. head, '0'); end; end; return 1;"};

}  // namespace dlock::redis::scripts
