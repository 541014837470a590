#pragma once
// What a dialect supplies to the shared table strategies: only SQL text (built once per backend
// from the validated, quoted table name) and which argument each placeholder binds. The result
// contract of each operation is fixed here, so the logic in src/*_strategy.cpp is written once.
//
// A script with more than one statement runs in one transaction; its result is the last
// statement's (rows_affected for "ours?", rows for returned values). One statement is one round
// trip (PostgreSQL does every operation in one; a dialect without RETURNING may need two).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlock_sql/connection.hpp"
#include "dlock_sql/params.hpp"

namespace dlock::sql {

// The values a statement can bind. Every placeholder of a statement is listed in `binds`, in
// placeholder order (PostgreSQL $n may repeat an argument: list it once per distinct $n, in n order).
enum class arg {
  name,     // bytes: the lock name, exactly as given
  owner,    // text: the lock object's owner id
  ttl_ms,   // int64: the grant's ttl in milliseconds; expiry = server clock + ttl
  version,  // int64: the version read before (optimistic strategy)
  channel,  // text: the notification channel (PostgreSQL NOTIFY); dialects without it never bind it
  // backend::list binds the prefix as `name`, and with it the end of the range of names that
  // start with it (name >= prefix AND (name < upper OR unbounded = 1): a range on the key, so the
  // prefix's bytes, '%' and '_' included, are compared as they are, never as a pattern):
  upper,      // bytes: the first name after every name that starts with the prefix
  unbounded,  // int64: 1 when no name is after them (the prefix is empty or all 0xff bytes), else 0
};

struct statement {
  std::string sql;
  std::vector<arg> binds;
};
using script = std::vector<statement>;

// One statement of a strategy's DDL, idempotent (IF NOT EXISTS). `unless_exists`, when set, is a
// SELECT binding `object` that returns a row when the object is already there: the statement is
// then not run at all. MariaDB needs that for sequences: CREATE SEQUENCE IF NOT EXISTS on an
// existing one waits for the metadata lock of every open transaction that drew from it (a FOR
// UPDATE lease keeps one for its whole hold), and every later NEXTVAL queues behind that wait.
struct ddl_statement {
  // A plain statement, always run: the dialects list most of their DDL as strings.
  ddl_statement(std::string create) : sql(std::move(create)) {}  // NOLINT(google-explicit-constructor)
  ddl_statement(const char* create) : sql(create) {}             // NOLINT(google-explicit-constructor)
  ddl_statement(std::string create, std::string exists_query, std::vector<param> object)
      : sql(std::move(create)), unless_exists(std::move(exists_query)), object(std::move(object)) {}

  std::string sql;
  std::string unless_exists;
  std::vector<param> object;
};
using ddl = std::vector<ddl_statement>;

// What backend::inspect, list and force_release run on the index and version tables. An empty
// script: that operation is refused with errc::not_supported.
struct inspection_sql {
  // Binds name. One row (owner, fencing token, milliseconds left) per live grant of the name.
  script holders;
  // Binds name. One row (owner) per live waiter of the fair queue, oldest first (fair=true only).
  script waiters;
  // Binds name (the prefix), upper, unbounded. One row (the name, in hex) per name that starts
  // with the prefix and has a live grant.
  script list;
  // force_release, one transaction: `lock_holders` (binds name) returns the rows `holders` does,
  // locked until the transaction ends, then `remove` (binds name, channel) ends those grants (the
  // row deleted, or freed where it must outlive them), waking waiters where the dialect can.
  script lock_holders;
  script remove;
};

// Columns every table strategy uses (see the README for the DDL per dialect):
//   name        binary, primary key (bytea / VARBINARY(n)): byte-exact, case-sensitive
//   owner       text, NULL when free (version strategy)
//   hold_count  integer, reentrant holds of `owner` (index strategy)
//   expires_at  timestamp on the SERVER clock (clock_timestamp() / NOW(6)) + ttl
//   fence       bigint, +1 per grant: the fencing token (version: the version column itself)

// Unique index: the row exists while held; a duplicate key means "held".
struct index_sql {
  ddl create;  // each idempotent (IF NOT EXISTS)
  // Binds name, owner, ttl_ms (and owner again where the dialect needs it). Returns ONE row
  // (fence, hold_count) when granted: a new row, an expired row taken over (fence+1,
  // hold_count=1), or our own live row (hold_count+1). Returns NO row, or one whose fence is NULL,
  // when another owner's live row holds it (a duplicate key error also means held).
  script acquire;
  // Binds name, owner. Our live row's hold_count-1, deleted at 0 (and the release notified where
  // the dialect can). rows_affected == 0: not ours (expired and maybe taken over) -> not_owner.
  // When release_reentered is not empty, `release` handles only the last hold (deletes our live
  // row with hold_count 1: the common case stays one round trip) ...
  script release;
  // ... and this one, run only when `release` matched no row, the re-entered case: binds name,
  // owner; hold_count-1 of our live row with hold_count > 1. rows_affected == 0 after both
  // (tried twice: a concurrent release by the same owner may move the count in between) ->
  // not_owner. Empty: `release` does both (PostgreSQL, in one statement).
  script release_reentered;
  // Binds name, owner, ttl_ms. rows_affected == 1 when our live row was extended.
  script renew;
  // The watchdog's batched renewal: ONE statement that extends `count` of our live rows at once
  // (count is a power of two up to 512, so a connection prepares a few texts only). Binds ttl_ms
  // (int64) first, then, for each position k in 0..count-1, the name (bytes) and owner (text) of
  // a lease, all different pairs except a repeat of the last one as padding. Its result is either
  // one row per extended row holding the position k of its pair (renew_many_returns_positions),
  // or rows_affected = rows extended, and then a batch short of its count is renewed again lease
  // by lease with `renew` to learn which one is no longer ours. Null: leases renew one by one.
  std::function<std::string(std::size_t count)> renew_many;
  bool renew_many_returns_positions = false;
  // No binds: deletes every expired row (the optional sweeper, for rows other tools write);
  // rows_affected = rows deleted. backend::sweep_expired runs it.
  script sweep;
  // Binds name. Returns one row (owner) when a live row exists (tests' is_held_on_server).
  script probe;
  // A dialect whose backend also makes reader-writer locks and semaphores of the name (units.hpp):
  // `acquire` grants nothing while they have live holders and then returns NO row, and
  // `acquire_fair` returns a row (NULL, NULL). This one, run only then, binds name and returns a
  // row (kind, units) per kind with live holders: a semaphore (units.hpp: semaphore_kind) refuses
  // the mutex as a name conflict, a reader-writer lock holds it as a writer would. Empty: no such
  // primitives.
  script units_in_use;
  // Fair mode (fair=true; empty scripts = the dialect has no fair mode). A waiters table
  // (name, owner, seq: arrival order from an identity/auto-increment, expires_at on the server
  // clock) queues the owners of timed/blocking acquires; a waiter that stops refreshing its row
  // leaves the queue after ttl.
  ddl create_fair;  // the waiters table's DDL, run only when fair=true
  // Binds name, owner, ttl_ms: joins the queue once (a later seq than every waiter before it),
  // or refreshes our row's expiry keeping its seq; may delete other owners' expired waiter rows.
  script enqueue;
  // Binds name, owner (and channel where the dialect notifies): leaves the queue (giving up,
  // timing out, failing). Wakes the next waiter where the dialect can.
  script dequeue;
  // No binds: deletes every expired waiter row (waiters that died without leaving the queue);
  // run by backend::sweep_expired after `sweep` when fair=true. rows_affected = rows deleted.
  script sweep_waiters;
  // Binds name, owner, ttl_ms. The fair attempt, same result contract as `acquire`, granted only
  // when the lock row is free/expired (or is our own live row: re-entry) AND no live waiter of
  // another owner is queued before ours (not queued at all: no live waiter of another owner, so a
  // fair try_acquire never barges past the queue). On grant it also removes our waiter row; on a
  // miss it refreshes our waiter row's expiry (if we have one). One statement where possible.
  script acquire_fair;
  // Fair mode where the dialect's locking reads would take gap locks (InnoDB at REPEATABLE READ:
  // an INSERT ... SELECT reading the waiters table locks the gaps beside the name, so attempts on
  // unrelated names deadlock each other). Then, where both are set, the fair attempt is three
  // short steps instead of `acquire_fair`: `fair_gate` (binds name, owner; a plain, non-locking
  // SELECT) returns a row when a live waiter of another owner is queued before ours (not queued:
  // any live one) and we hold no live row of the name; without a row `acquire` runs as in the
  // unfair mode; a waiter that was queued then leaves the queue on a grant (`dequeue`) or keeps
  // its place on a miss with `fair_refresh` (binds name, owner, ttl_ms: one statement that
  // refreshes our waiter row, or adds it at the back if it expired). The order is only read,
  // never locked: the lock row's primary key alone excludes, the queue only orders.
  script fair_gate;
  script fair_refresh;
  // backend::inspect, list, force_release of the lock rows (the reader-writer locks' and
  // semaphores' holder rows are not looked at).
  inspection_sql inspection;
};

// SELECT ... FOR UPDATE: the lock is the row lock of an open transaction on a dedicated connection.
struct forupdate_sql {
  ddl create;
  // Binds name. Inserts the row if absent; a duplicate key is success. Autocommit, before BEGIN.
  script ensure_row;
  // Binds name. Inside the transaction: locks the row NOWAIT / waiting (bounded by the session's
  // lock wait timeout); lock_not_available means held. Returns one row, or NO row when the row
  // does not exist yet (the strategy then rolls back, runs ensure_row and tries again).
  // When bump_fence is empty, the lock statement itself increments and returns the fence.
  script lock_nowait;
  script lock_wait;
  // Binds name. Same transaction: fence + 1, returns one row (fence). May be empty (see above).
  script bump_fence;
  // Binds name. Returns one row if the row is locked by someone (NOWAIT probe in a transaction).
  script probe;

  // For backend::inspect, list and force_release: the rows of `range` whose lock an open
  // transaction holds now, each with the server's id of the holding session and, where the
  // server shows it, the holder's fencing token. Null: refused (errc::not_supported).
  struct name_range {
    std::string from;   // the name (exact), or the prefix
    std::string upper;  // see arg::upper
    bool bounded = false;
    bool exact = false;  // only the row named `from`
  };
  struct held_row {
    std::string hex_name;  // the name's bytes in hex (encode(name, 'hex') / HEX(name))
    std::int64_t session = 0;
    std::optional<std::int64_t> fence;
  };
  std::function<bool(connection& c, const name_range& range, std::vector<held_row>& out, sql_error& err)> held_rows;
  // How a holder is named ("pid 123"), and the statement that ends its session (the server then
  // rolls back its transaction, which frees the row lock and every other lock the session held).
  std::string session_label;
  std::function<std::string(std::int64_t session)> end_session;
};

// Optimistic version: a conditional update on the version; the version is the fencing token.
struct version_sql {
  ddl create;
  script ensure_row;  // binds name; inserts (version 0, owner NULL) if absent
  // Binds name. One row: (version, free) where free is 1 when owner IS NULL or expired, else 0.
  script read;
  // Binds owner, ttl_ms, name, version. UPDATE ... SET owner, version = version + 1, expires_at
  // WHERE name AND version = ? AND (free or expired). rows_affected == 1: granted, fence = version+1.
  script acquire;
  // Binds name, owner, version. Frees our grant: rows_affected == 0 -> not_owner.
  script release;
  // Binds ttl_ms, name, owner, version. rows_affected == 1 when extended.
  script renew;
  // The watchdog's batched renewal, as index_sql::renew_many, with three binds per position:
  // name, owner, version.
  std::function<std::string(std::size_t count)> renew_many;
  bool renew_many_returns_positions = false;
  script probe;               // binds name; one row (owner) when held and live
  inspection_sql inspection;  // fencing token = the version; `remove` frees the grant, keeps the row
  // No binds: frees every expired grant (owner and expires_at NULL) WITHOUT deleting the row: its
  // version is the fencing token and must never restart. rows_affected = grants freed. Empty:
  // backend::sweep_expired has nothing to do.
  script sweep;
};

}  // namespace dlock::sql
