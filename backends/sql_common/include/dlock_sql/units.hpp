#pragma once
// What a dialect supplies for the reader-writer lock and the counting semaphore of the unique-index
// strategy (units_strategy.cpp): SQL text over two tables, written by the dialect from the
// validated, quoted table name. Lock names, grant ids and every value are bound parameters.
//
// Both primitives are pools of units. A semaphore of N is a pool of N units, an acquire takes k;
// a reader-writer lock is a pool of rw_units units, a reader takes 1 and a writer all of them.
//   anchor  (name, kind, max_count, writer_waiting_until, writer_waiting): one row per pool, the
//           row the granting statement locks FOR UPDATE, so the count check and the insert of a
//           grant are one atomic step; max_count is checked against every user's.
//   holders (name, kind, grant_id, units, fence, expires_at): one row per live grant, expiring on
//           the server clock; rows past expires_at count for nothing and are deleted on the way.
// kind: 1 for reader-writer locks, 2 for semaphores.
// One name, one lock: the mutex of a name (the index strategy's lock row) counts as a writer of
// the name's reader-writer lock, and a semaphore never holds beside the mutex or the reader-writer
// lock of its name. The grant checks both (a live lock row, live holders of the other kind) with
// shared locks on what it reads, and the mutex's statement checks the holders the same way
// (dialect.hpp: index_sql::units_in_use), so two racing grants of different kinds wait for each
// other or deadlock (one is rolled back and retried): never both granted.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dlock_sql/dialect.hpp"

namespace dlock::sql {

inline constexpr std::int64_t rw_kind = 1;
inline constexpr std::int64_t semaphore_kind = 2;
// A reader-writer lock's pool: a writer takes all of it, a reader one unit.
inline constexpr std::int64_t rw_units = std::int64_t{1} << 40;

// The binds of each statement are fixed here (in this order), so the strategy is written once.
struct units_sql {
  ddl create;  // each idempotent (IF NOT EXISTS)
  // The attempt, one autocommitted statement. Binds grant_id, units, ttl_ms, kind, name,
  // max_count, heed_writer_mark (1 for readers: no grant while the anchor's writer mark is live),
  // units. Locks the anchor row FOR UPDATE, sums the live holders' units, and inserts our holder
  // row only when `units` more fit within max_count, the mutex of the name has no live lock row
  // and the other kind has no live holder. Returns one row (fence) when granted, none otherwise
  // (no anchor yet, another max_count, not enough free, a live writer mark, the mutex or the other
  // kind of the name).
  std::string grant;
  // Binds kind, name. One row (max_count, live units, expired rows, 1 when the mutex of the name
  // has a live lock row else 0, the other kind's live units) when the anchor exists.
  std::string inspect;
  // Binds kind, name, max_count. Creates the anchor if absent (racing creators are fine).
  std::string create_anchor;
  // Binds max_count, kind, name, kind, name. Sets the anchor's max_count only while no live holder
  // exists (every user of a name gives the same max_count; a name left idle may change it).
  std::string reset_max_count;
  // Binds kind, name. Deletes the expired holder rows of one pool.
  std::string delete_expired;
  // Binds ttl_ms, grant_id, kind, name. A waiting writer's mark: readers stay out until it
  // expires (ttl from now on the server clock) or the writer clears it.
  std::string mark_writer;
  // Binds kind, name, grant_id. Clears the mark if it is still this writer's.
  std::string clear_writer;
  // Binds name, kind, grant_id. Deletes our holder row; returns one row (1 when it was live, 0
  // when it had expired): no row or 0 -> not_owner.
  std::string release;
  // Binds ttl_ms, name, owner (the grant id): extends our live holder row; rows_affected 0 -> lost.
  script renew;
  // The watchdog's batch, as index_sql::renew_many: binds ttl_ms, then (name, grant id) per position.
  std::function<std::string(std::size_t count)> renew_many;
  // No binds: deletes every expired holder row (backend::sweep_expired).
  script sweep;
  // No binds, run after `sweep`: deletes the anchors of idle pools (no holder row, no live writer
  // mark), which new names would otherwise leave behind forever. Harmless even in a race with a
  // grant: the holder rows are the state; a pool whose anchor went makes a new one at its next miss.
  script sweep_anchors;
};

}  // namespace dlock::sql
