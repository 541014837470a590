#pragma once
// The Lua scripts of the redis backends, run by EVALSHA. Key and argument layouts:
//   simple    : redis-py's redis.lock.Lock layout (STRING key = name, value = token).
//   reentrant : Redisson's RLock / RFencedLock layout
//   (https://github.com/redisson/redisson/blob/master/redisson/src/main/java/org/redisson/RedissonLock.java). fair :
//   Redisson's RFairLock layout (queue list + timeout zset).
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

// One name, one lock: the mutex of a name (any of the three layouts), its reader-writer lock
// and its semaphore all live at the name's raw key, so every acquire script first asks what that
// key holds now, in the same atomic step as its grant:
//   'free'      nothing;
//   'mutex'     a redis-py Lock string, or a Redisson RLock / RFairLock hash (owner fields only);
//   'rw'        a Redisson RReadWriteLock hash (it has a 'mode' field);
//   'semaphore' a Redisson semaphore's permit count: a string holding an integer, without expiry
//               (RPermitExpirableSemaphore and RSemaphore keep it after the last permit is back);
//   or the key's type for anything else (a list, a set: not a lock).
// `quiet`: the holder is a client that publishes nothing on release (a string that is not a dlock
// token: redis-py), so a waiter can only find out by trying again. dlock's tokens start 'dlock:'.
#define DLOCK_NAME_KIND                                                                                       \
  "local function kind_of(key) local t = redis.call('type', key)['ok']; "                                     \
  "if t == 'none' then return 'free', false, t; end; "                                                        \
  "if t == 'hash' then if redis.call('hexists', key, 'mode') == 1 then return 'rw', false, t; end; "          \
  "return 'mutex', false, t; end; "                                                                           \
  "if t == 'string' then local v = redis.call('get', key); "                                                  \
  "if string.sub(v, 1, 6) == 'dlock:' then return 'mutex', false, t; end; "                                   \
  "if redis.call('pttl', key) == -1 and string.match(v, '^%-?%d+$') then return 'semaphore', false, t; end; " \
  "return 'mutex', true, t; end; "                                                                            \
  "return t, false, t; end; "                                                                                 \
  "local function not_a_lock(t) return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ', not a lock'); end; "

// A waiting mutex holds back new readers as a waiting writer does (the reader-writer lock is
// writer-preferred among dlock clients): its tries keep an entry in the name's waiting-writers
// zset "{name}:dlock_writers_waiting" (member -> expiry, ms on the server clock), and its grant
// takes it out. `entry` '' (a try that does not wait) leaves the set alone.
#define DLOCK_WAITING_WRITER                                                            \
  "local function wait_as_writer(set, entry, ttl) if entry == '' then return; end; "    \
  "local clock = redis.call('time'); "                                                  \
  "local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000); "     \
  "redis.call('zadd', set, now + tonumber(ttl), entry); "                               \
  "redis.call('pexpire', set, math.max(redis.call('pttl', set), tonumber(ttl))); end; " \
  "local function stop_waiting(set, entry) if entry ~= '' then redis.call('zrem', set, entry); end; end; "

// Every lock's acquire script answers, besides its grant and its "held" answer, {-3, permits
// recorded in "{name}:timeout", 'semaphore'} when the name is a semaphore's: a conflict, never a
// wait (the semaphore's count key stays until someone deletes it). A "held" answer has a third
// element, 1 when no release message will come (`quiet` above).

// KEYS = [lock, fencing counter, {lock}:dlock_writers_waiting, {lock}:timeout]
// ARGV = [token, ttl ms, waiting entry or '']
//   -> {1, fencing token} | {0, pttl, quiet} | {-3, permits, 'semaphore'}
inline const script simple_acquire{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_NAME_KIND DLOCK_WAITING_WRITER
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then stop_waiting(KEYS[3], ARGV[3]); "
    "return {1, next_fencing_token(KEYS[2])} end "
    "local kind, quiet, t = kind_of(KEYS[1]); "
    "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[4]), 'semaphore'}; end; "
    "if kind ~= 'mutex' and kind ~= 'rw' then return not_a_lock(t); end; "
    "wait_as_writer(KEYS[3], ARGV[3], ARGV[2]); "
    "return {0, redis.call('pttl', KEYS[1]), quiet and 1 or 0}"};

// A whole set of redis-py layout locks in one step (multi_lock): every key is free, and all are
// set, or none is. Each member has its four keys of simple_acquire and a token of its own.
// KEYS = [lock, fencing counter, {lock}:dlock_writers_waiting, {lock}:timeout] per member
// ARGV = [ttl ms, token per member]
//   -> {1, fencing token per member} | {0, pttl, quiet, member} | {-3, permits, 'semaphore', member}
inline const script simple_acquire_set{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_NAME_KIND
    "local members = #ARGV - 1; "
    "for i = 1, members do local key = KEYS[4 * i - 3]; "
    "if redis.call('exists', key) == 1 then local kind, quiet, t = kind_of(key); "
    "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[4 * i]), 'semaphore', i}; end; "
    "if kind ~= 'mutex' and kind ~= 'rw' then return not_a_lock(t); end; "
    "return {0, redis.call('pttl', key), quiet and 1 or 0, i}; end; end; "
    "local granted = {1}; "
    "for i = 1, members do redis.call('set', KEYS[4 * i - 3], ARGV[i + 1], 'PX', ARGV[1]); "
    "granted[i + 1] = next_fencing_token(KEYS[4 * i - 2]); end; "
    "return granted"};

// KEYS = [lock, release channel, reader-writer lock's channel (optional)]  ARGV = [token]
//   -> 1 released | 0 not ours (redis-py's release). The release also wakes the name's
// reader-writer lock waiters ('1': every reader may go), who are held back by the mutex too.
inline const script simple_release{"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]); "
                                   "redis.call('publish', KEYS[2], '0'); "
                                   "if KEYS[3] then redis.call('publish', KEYS[3], '1'); end; return 1 end return 0"};

// KEYS = [lock]  ARGV = [token, ttl ms]  -> 1 extended | 0 not ours (redis-py's reacquire)
inline const script simple_renew{
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"};

// Redlock's renewal on one master: also sets the key where it is absent, so a grant that took a
// bare majority (a split vote, or a master that was unreachable) gains the others at its renewals.
// KEYS = [lock]  ARGV = [token, ttl ms]  -> 1 extended | 2 set, it was absent | 0 another's
inline const script redlock_renew{"local owner = redis.call('get', KEYS[1]); "
                                  "if owner == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]); return 1 end "
                                  "if owner then return 0 end "
                                  "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]); return 2"};

// Redisson RFencedLock acquire (its INCR raised to the clock, above), on a key that is free or a
// mutex hash with our field: a reader-writer lock's hash (a 'mode' field) is never re-entered,
// although a reader's field can be the same "<client id>:<owner id>" as ours.
// KEYS = [name, redisson_lock_token:{name}, {name}:dlock_writers_waiting, {name}:timeout]
// ARGV = [ttl ms, owner field, waiting entry or '']
//   -> {-1, fencing token} acquired | {pttl, -1, quiet} held by someone else | {-3, permits, 'semaphore'}
inline const script reentrant_acquire{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_NAME_KIND DLOCK_WAITING_WRITER
    "local kind, quiet, t = kind_of(KEYS[1]); "
    "if kind == 'free' or (kind == 'mutex' and t == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "local token = next_fencing_token(KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); stop_waiting(KEYS[3], ARGV[3]); return {-1, token}; end; "
    "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[4]), 'semaphore'}; end; "
    "if kind ~= 'mutex' and kind ~= 'rw' then return not_a_lock(t); end; "
    "wait_as_writer(KEYS[3], ARGV[3], ARGV[1]); "
    "return {redis.call('pttl', KEYS[1]), -1, quiet and 1 or 0};"};

// Whether KEYS[1] is a mutex hash (no 'mode' field: not a reader-writer lock's) holding ARGV[n].
#define DLOCK_OWNS_MUTEX_HASH(field)                                                              \
  "(redis.call('type', KEYS[1])['ok'] == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 0 " \
  "and redis.call('hexists', KEYS[1], " field ") == 1)"

// Redisson RLock unlock (without the unlock latch, which only makes Java's retried unlock
// idempotent), publishing also on the name's reader-writer lock channel when the lock goes.
// KEYS = [name, redisson_lock__channel:{name}, redisson_rwlock:{name} (optional)]
// ARGV = ['0', ttl ms, owner field, 'publish' | 'spublish']
//   -> nil not ours | 0 still held re-entrantly | 1 released and published
inline const script reentrant_release{"if not " DLOCK_OWNS_MUTEX_HASH(
    "ARGV[3]") " then return nil; end; "
               "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
               "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
               "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
               "if KEYS[3] then redis.call(ARGV[4], KEYS[3], '1'); end; return 1; end;"};

// Redisson's renewal (LockTask) for one key, on a mutex hash only. KEYS = [name]  ARGV = [ttl ms, owner field] -> 1 | 0
inline const script reentrant_renew{
    "if " DLOCK_OWNS_MUTEX_HASH("ARGV[2]") " then redis.call('pexpire', KEYS[1], ARGV[1]); "
                                           "return 1; end; return 0;"};

// Redisson RFairLock
// (https://github.com/redisson/redisson/blob/master/redisson/src/main/java/org/redisson/RedissonFairLock.java). Every
// fair script first drops stale waiters whose timeout score has passed, exactly as Redisson's do.
#define DLOCK_REDISSON_FAIR_SWEEP                                               \
  DLOCK_NEXT_FENCING_TOKEN DLOCK_NAME_KIND DLOCK_WAITING_WRITER                 \
      "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); " \
      "if firstThreadId2 == false then break; end; "                            \
      "local timeout = redis.call('zscore', KEYS[3], firstThreadId2); "         \
      "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "    \
      "redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end; "

// The grant branches of both fair scripts: free with the queue empty or headed by us, or a
// re-entry into our own mutex hash; and the conflict with a semaphore. `quiet` also covers a
// string holder (a redis-py Lock or a redis:// mutex): it publishes nowhere a fair waiter listens.
#define DLOCK_REDISSON_FAIR_GRANT                                                             \
  "local kind, quiet, t = kind_of(KEYS[1]); "                                                 \
  "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[6]), 'semaphore'}; end; " \
  "if kind ~= 'free' and kind ~= 'mutex' and kind ~= 'rw' then return not_a_lock(t); end; "   \
  "if kind == 'free' and ((redis.call('exists', KEYS[2]) == 0) "                              \
  "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "                                   \
  "redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2]); "                       \
  "local keys = redis.call('zrange', KEYS[3], 0, -1); "                                       \
  "for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end; " \
  "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "        \
  "stop_waiting(KEYS[5], ARGV[5]); return {-1, next_fencing_token(KEYS[4])}; end; "           \
  "if kind == 'mutex' and t == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " \
  "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "     \
  "stop_waiting(KEYS[5], ARGV[5]); return {-1, next_fencing_token(KEYS[4])}; end; "           \
  "if t == 'string' then quiet = true; end; "

// Take it now or not at all (Redisson's tryLock() branch, plus the RFencedLock token INCR).
// KEYS = [name, queue, timeout zset, redisson_lock_token:{name}, {name}:dlock_writers_waiting, {name}:timeout]
// ARGV = [ttl, owner field, wait ms, now ms, waiting entry or '']
//   -> {-1, fencing token} | {pttl, -1, quiet} | {-3, permits, 'semaphore'}
inline const script fair_try{DLOCK_REDISSON_FAIR_SWEEP DLOCK_REDISSON_FAIR_GRANT
                             "return {redis.call('pttl', KEYS[1]), -1, quiet and 1 or 0};"};

// Take it or join the queue (Redisson's blocking branch, plus the token INCR). Same KEYS/ARGV.
//   -> {-1, fencing token} | {ms to wait, -1, quiet} | {-3, permits, 'semaphore'}
inline const script fair_enqueue{
    DLOCK_REDISSON_FAIR_SWEEP DLOCK_REDISSON_FAIR_GRANT
    "wait_as_writer(KEYS[5], ARGV[5], ARGV[1]); "
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]); "
    "if timeout ~= false then local ttl = redis.call('pttl', KEYS[1]); return {math.max(0, ttl), -1, quiet and 1 or "
    "0}; end; "
    "local lastThreadId = redis.call('lindex', KEYS[2], -1); local ttl; "
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false "
    "then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]); "
    "else ttl = redis.call('pttl', KEYS[1]); end; "
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]); "
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]); end; "
    "return {ttl, -1, quiet and 1 or 0};"};

// Redisson's fair unlock: decrement; at zero DEL and publish '0' to the NEXT waiter's own channel
// (redisson_lock__channel:{name}:<next owner>), and '1' on the name's reader-writer lock channel.
// Deviation: a missing lock returns nil (not_owner) instead of Redisson's 1, after waking the
// next waiter the same way.
// KEYS = [name, queue, timeout zset, redisson_lock__channel:{name}, redisson_rwlock:{name}]
// ARGV = ['0', ttl, owner, now, 'publish' | 'spublish']
inline const script fair_release{
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); "
    "if firstThreadId2 == false then break; end; "
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2); "
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return nil; end; "
    "if not " DLOCK_OWNS_MUTEX_HASH(
        "ARGV[3]") " then return nil; end; "
                   "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
                   "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; "
                   "redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', KEYS[2], 0); "
                   "if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; "
                   "if KEYS[5] then redis.call(ARGV[5], KEYS[5], '1'); end; return 1;"};

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
