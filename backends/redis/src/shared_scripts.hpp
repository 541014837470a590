#pragma once
// The Lua scripts of the reader-writer lock and the semaphore (redis_primitives.hpp), written for
// Redisson's layouts so a Java service on Redisson shares the names:
//   reader-writer lock: RReadWriteLock (RedissonReadLock.java / RedissonWriteLock.java),
//   semaphore:          RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore.java).
// Each grant also takes a fencing token in the same step: the reader-writer lock from the name's
// one counter, redisson_lock_token:{name}, which the mutex of every layout (and Redisson's
// RFencedLock) also counts with, so a resource fenced by the name sees one rising sequence; the
// semaphore from dlock_semaphore_token:{name}. Redisson's RReadWriteLock and semaphores take no
// tokens. The deviations from Redisson's scripts are named where they are.
#include "scripts.hpp"

namespace dlock::redis::scripts {

// ---- reader-writer lock ------------------------------------------------------------------------
// The hash at the lock's raw name: 'mode' = 'read' | 'write', one field per holder with its hold
// count: a reader's "<client id>:<owner id>", a writer's "<client id>:<owner id>:write". Every
// read hold also has a string key "{name}:<reader field>:rwlock_timeout:<n>" (n = 1..count) with
// its own PX ttl; the hash's own ttl is the longest of them, so a dead reader's holds run out
// alone while the others renew theirs.

// Writer preference, dlock's addition (Redisson's readers ignore it): a zset
// "{name}:dlock_writers_waiting" of waiting writers and waiting mutexes (DLOCK_WAITING_WRITER) ->
// expiry (ms, server clock), renewed by each waiter's tries. A dlock reader is not granted while
// it has a live member.
#define DLOCK_SERVER_NOW_MS            \
  "local clock = redis.call('time'); " \
  "local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000); "

// The mutex of the name counts as a writer: the scripts grant nothing while the name's raw key is
// a mutex's (DLOCK_NAME_KIND), and a release that frees the name also wakes the mutex's waiters:
// '0' on redisson_lock__channel:{name} (redis:// and redis+reentrant:// waiters) and on the
// channel of the head of redisson_lock_queue:{name} (a redis+fair:// waiter's own channel).
#define DLOCK_WAKE_MUTEX_WAITERS                                                            \
  "local function wake_mutex_waiters(channel, queue) redis.call('publish', channel, '0'); " \
  "local head = redis.call('lindex', queue, 0); "                                           \
  "if head then redis.call('publish', channel .. ':' .. head, '0'); end; end; "

// KEYS = [name, {name}:<field>:rwlock_timeout, redisson_lock_token:{name}, {name}:dlock_writers_waiting,
// {name}:timeout] ARGV = [ttl ms, field]
//   -> {-1, fencing token} | {pttl or ms until the next waiting writer's entry expires, -1, quiet}
//    | {-3, permits, 'semaphore'}
// Deviation: a writer's own read (Redisson's downgrade, mode 'write' with our writer field) is
// refused: a dlock rw_lock object is one owner, and its read must wait for its own write.
inline const script rw_read_acquire{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_SERVER_NOW_MS DLOCK_NAME_KIND
    "redis.call('zremrangebyscore', KEYS[4], 0, now); "
    "local kind, quiet, t = kind_of(KEYS[1]); "
    "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[5]), 'semaphore'}; end; "
    "if kind == 'mutex' then return {redis.call('pttl', KEYS[1]), -1, quiet and 1 or 0}; end; "
    "if kind ~= 'free' and kind ~= 'rw' then return not_a_lock(t); end; "
    "local mode = false; if kind == 'rw' then mode = redis.call('hget', KEYS[1], 'mode'); end; "
    "if mode ~= 'write' and redis.call('zcard', KEYS[4]) > 0 then "
    "if mode == false then local first = redis.call('zrange', KEYS[4], 0, 0, 'WITHSCORES'); "
    "return {math.max(1, tonumber(first[2]) - now), -1, 0}; end; "
    "return {redis.call('pttl', KEYS[1]), -1, 0}; end; "
    "if mode == false then redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, next_fencing_token(KEYS[3])}; end; "
    "if mode == 'read' then local n = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1]))); "
    "return {-1, next_fencing_token(KEYS[3])}; end; "
    "return {redis.call('pttl', KEYS[1]), -1, 0};"};

// Redisson's read unlock: drop one hold (its highest-numbered timeout key); while other holds are
// alive keep the hash until the longest of their timeouts, otherwise delete it and publish '0'
// (Redisson's UNLOCK_MESSAGE) on redisson_rwlock:{name}, and wake the mutex's waiters.
// KEYS = [name, redisson_rwlock:{name}, {name}:<field>:rwlock_timeout, {name},
//         redisson_lock__channel:{name}, redisson_lock_queue:{name}]  ARGV = [field]
//   -> 1 released | 0 not ours
// Deviation: a missing hash answers 0 (not_owner), where Redisson publishes and answers 1.
inline const script rw_read_release{
    DLOCK_WAKE_MUTEX_WAITERS "if redis.call('type', KEYS[1])['ok'] ~= 'hash' then return 0; end; "
                             "local mode = redis.call('hget', KEYS[1], 'mode'); "
                             "if mode == false or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0; end; "
                             "local n = redis.call('hincrby', KEYS[1], ARGV[1], -1); "
                             "if n <= 0 then redis.call('hdel', KEYS[1], ARGV[1]); end; "
                             "redis.call('del', KEYS[3] .. ':' .. (n + 1)); "
                             "if redis.call('hlen', KEYS[1]) > 1 then local longest = -3; "
                             "for _, field in ipairs(redis.call('hkeys', KEYS[1])) do "
                             "local count = tonumber(redis.call('hget', KEYS[1], field)); "
                             "if type(count) == 'number' then for i = count, 1, -1 do "
                             "longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. field .. "
                             "':rwlock_timeout:' .. i)); end; end; end; "
                             "if longest > 0 then redis.call('pexpire', KEYS[1], longest); return 1; end; "
                             "if mode == 'write' then return 1; end; end; "
                             "redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], '0'); "
                             "wake_mutex_waiters(KEYS[5], KEYS[6]); return 1;"};

// Extends this reader's holds (its timeout keys) and the hash to at least the ttl. Deviation:
// Redisson's read renewal extends every reader's timeout keys, a dead one's included; this one
// only ours, so a dead reader's holds run out while we renew.
// KEYS = [name, {name}:<field>:rwlock_timeout]  ARGV = [ttl ms, field]  -> 1 | 0 (no hold of ours left)
inline const script rw_read_renew{
    "if redis.call('type', KEYS[1])['ok'] ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 0 then return 0; end; "
    "local count = redis.call('hget', KEYS[1], ARGV[2]); "
    "if count == false then return 0; end; local alive = 0; "
    "for i = tonumber(count), 1, -1 do alive = alive + redis.call('pexpire', KEYS[2] .. ':' .. i, ARGV[1]); end; "
    "if alive == 0 then return 0; end; "
    "redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1]))); return 1;"};

// Redisson's write lock, granted only on a free name (a mutex's hash has no 'mode' either, and is
// not free). KEYS = [name, redisson_lock_token:{name}, {name}:dlock_writers_waiting, {name}:timeout]
// ARGV = [ttl ms, writer field, waiting entry ('' for a try that does not wait)]
//   -> {-1, fencing token} | {pttl, -1, quiet} | {-3, permits, 'semaphore'}
// A waiting writer's miss (re)writes its entry in the waiting set, expiring a ttl from now; its
// grant removes it. Deviation: no re-entry (Redisson counts a second write of the same field).
inline const script rw_write_acquire{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_NAME_KIND DLOCK_WAITING_WRITER
    "local kind, quiet, t = kind_of(KEYS[1]); "
    "if kind == 'free' then "
    "redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "stop_waiting(KEYS[3], ARGV[3]); return {-1, next_fencing_token(KEYS[2])}; end; "
    "if kind == 'semaphore' then return {-3, redis.call('zcard', KEYS[4]), 'semaphore'}; end; "
    "if kind ~= 'mutex' and kind ~= 'rw' then return not_a_lock(t); end; "
    "wait_as_writer(KEYS[3], ARGV[3], ARGV[1]); "
    "return {redis.call('pttl', KEYS[1]), -1, quiet and 1 or 0};"};

// A waiting writer (or a waiting mutex) that gives up leaves the waiting set; when it was the last
// one and nobody holds the name exclusively (free, or held by readers), the readers it held back
// are woken ('1', as a write unlock).
// KEYS = [{name}:dlock_writers_waiting, name, redisson_rwlock:{name}]  ARGV = [waiting entry]  -> 1
inline const script rw_writer_gives_up{
    "redis.call('zrem', KEYS[1], ARGV[1]); "
    "if redis.call('zcard', KEYS[1]) == 0 then local t = redis.call('type', KEYS[2])['ok']; "
    "if t == 'none' or (t == 'hash' and redis.call('hget', KEYS[2], 'mode') == 'read') then "
    "redis.call('publish', KEYS[3], '1'); end; end; return 1;"};

// Redisson's write unlock: drop the hold; with no field left but 'mode', delete the hash, publish
// '1' (Redisson's READ_UNLOCK_MESSAGE: every waiting reader may go) and wake the mutex's waiters;
// with reads of the same field left (a Redisson writer's downgrade), mode becomes 'read'.
// KEYS = [name, redisson_rwlock:{name}, redisson_lock__channel:{name}, redisson_lock_queue:{name}]
// ARGV = [writer field, ttl ms]  -> 1 released | 0 not ours
inline const script rw_write_release{
    DLOCK_WAKE_MUTEX_WAITERS
    "if redis.call('type', KEYS[1])['ok'] ~= 'hash' then return 0; end; "
    "if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0; "
    "end; "
    "if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then redis.call('pexpire', KEYS[1], ARGV[2]); return 1; end; "
    "redis.call('hdel', KEYS[1], ARGV[1]); "
    "if redis.call('hlen', KEYS[1]) == 1 then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], '1'); "
    "wake_mutex_waiters(KEYS[3], KEYS[4]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; return 1;"};

// Redisson's lock renewal (HEXISTS, PEXPIRE) of a write hold, while the hash is in write mode.
// KEYS = [name]  ARGV = [ttl ms, writer field]  -> 1 | 0
inline const script rw_write_renew{
    "if redis.call('type', KEYS[1])['ok'] == 'hash' and redis.call('hget', KEYS[1], 'mode') == 'write' "
    "and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return 1; end; return 0;"};

// ---- semaphore ---------------------------------------------------------------------------------
// A string key at the raw name with the permits available; a zset "{name}:timeout" of permit id
// (16 bytes, as Redisson's) -> expiry in ms since 1970 on the server clock; releases publish the
// permits then available on redisson_sc:{name}. An expired permit is returned (ZREM, INCRBY,
// publish) by the next script that looks, as Redisson's do.

// now_ms() on the server clock, and the return of every expired permit. Lua's unpack is limited
// to a few thousand values, so long lists go in slices.
#define DLOCK_SEMAPHORE_SWEEP                                                                          \
  "local clock = redis.call('time'); "                                                                 \
  "local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000); "                    \
  "local function zrem_all(key, ids) local removed = 0; for i = 1, #ids, 1000 do "                     \
  "removed = removed + redis.call('zrem', key, unpack(ids, i, math.min(i + 999, #ids))); end; "        \
  "return removed; end; "                                                                              \
  "local function sweep(count, timeouts, channel) "                                                    \
  "local expired = redis.call('zrangebyscore', timeouts, 0, now); if #expired == 0 then return; end; " \
  "zrem_all(timeouts, expired); local value = redis.call('incrby', count, #expired); "                 \
  "if value > 0 then redis.call('publish', channel, value); end; end; "

// Takes ARGV[3] permits together, or none. The count is initialised to max_count when missing
// (Redisson's trySetPermits); a server whose permits (available + held) differ from max_count
// answers {-2, its total}. A name held as a mutex or a reader-writer lock (DLOCK_NAME_KIND) is a
// conflict, answered before anything is touched: {-3, 0, what it is}.
// KEYS = [name, {name}:timeout, redisson_sc:{name}, dlock_semaphore_token:{name}]
// ARGV = [ttl ms, max_count, permits, permit id 1, ..., permit id <permits>]
//   -> {-1, fencing token} | {ms until the next permit expires, or 0, 0} | {-2, total on the server}
//    | {-3, 0, 'mutex' | 'reader-writer lock'}
inline const script semaphore_acquire{
    DLOCK_NEXT_FENCING_TOKEN DLOCK_SEMAPHORE_SWEEP DLOCK_NAME_KIND
    "local kind, quiet, t = kind_of(KEYS[1]); "
    "if kind == 'mutex' then return {-3, 0, 'mutex'}; end; "
    "if kind == 'rw' then return {-3, 0, 'reader-writer lock'}; end; "
    "if kind ~= 'free' and kind ~= 'semaphore' then return not_a_lock(t); end; "
    "sweep(KEYS[1], KEYS[2], KEYS[3]); "
    "local available = redis.call('get', KEYS[1]); "
    "if available == false then redis.call('set', KEYS[1], ARGV[2]); available = ARGV[2]; end; "
    "available = tonumber(available); "
    "local total = available + redis.call('zcard', KEYS[2]); "
    "if total ~= tonumber(ARGV[2]) then return {-2, total}; end; "
    "if available >= tonumber(ARGV[3]) then redis.call('decrby', KEYS[1], ARGV[3]); "
    "local expiry = now + tonumber(ARGV[1]); "
    "for i = 4, #ARGV do redis.call('zadd', KEYS[2], expiry, ARGV[i]); end; "
    "return {-1, next_fencing_token(KEYS[4])}; end; "
    "local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if first[2] == nil then return {0, 0}; end; "
    "return {math.max(0, tonumber(first[2]) - now), 0};"};

// Gives back this lease's permits and publishes the count then available. Redisson's tryRelease:
// a permit already expired (score <= now) or already gone means it was not ours any more.
// KEYS = [name, {name}:timeout, redisson_sc:{name}]  ARGV = [permit id 1, ...]  -> 1 | 0 not ours
inline const script semaphore_release{
    DLOCK_SEMAPHORE_SWEEP
    "local ours = true; "
    "for i = 1, #ARGV do local expiry = redis.call('zscore', KEYS[2], ARGV[i]); "
    "if expiry == false or tonumber(expiry) <= now then ours = false; end; end; "
    "local removed = zrem_all(KEYS[2], ARGV); "
    "if removed > 0 then redis.call('publish', KEYS[3], redis.call('incrby', KEYS[1], removed)); end; "
    "sweep(KEYS[1], KEYS[2], KEYS[3]); "
    "if ours and removed == #ARGV then return 1; end; return 0;"};

// Redisson's updateLeaseTime for every permit of the lease, all or nothing: 0 when one of them
// expired or is gone (the lease is lost; its release gives the others back).
// KEYS = [{name}:timeout]  ARGV = [ttl ms, permit id 1, ...]  -> 1 | 0
inline const script semaphore_renew{
    "local clock = redis.call('time'); "
    "local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000); "
    "for i = 2, #ARGV do local expiry = redis.call('zscore', KEYS[1], ARGV[i]); "
    "if expiry == false or tonumber(expiry) <= now then return 0; end; end; "
    "local expiry = now + tonumber(ARGV[1]); "
    "for i = 2, #ARGV do redis.call('zadd', KEYS[1], 'XX', expiry, ARGV[i]); end; return 1;"};

}  // namespace dlock::redis::scripts
