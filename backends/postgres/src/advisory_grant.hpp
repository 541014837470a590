#pragma once
// What postgres+advisory's three primitives share: the backend's state (pool, shared sessions,
// statements), the lease (advisory locks held on one session, released by one statement), the
// keys of a name, and the acquisition of the name's key by the mutex (exclusive), the
// reader-writer lock's writers (exclusive, the same key as the mutex of the same name) and its
// readers (shared).
//
// One name, one lock. The mutex and the rw lock are one server lock (key k below). A semaphore of
// the name never holds beside them: each side publishes its presence, then probes for the other
// kind, and withdraws when it finds it (errc::name_conflict), so two racing acquirers of different
// kinds may both be refused, never both granted.
//   k  the name's int8 key, sha256_int64(name): mutex and writers exclusive, readers shared.
//   q  the semaphore mark: two-int4 key semaphore_slot_key(name, 0xFFFFFFFF), held shared by every
//      semaphore lease of the name (and by an acquirer while it takes its slots). The mutex and the
//      rw lock probe it with pg_try_advisory_lock (exclusive) once they hold k.
//   w  the writer mark: semaphore_slot_key(name, 0xFFFFFFFE), held shared by the rw lock's writers
//      only, so that a refused semaphore can say whether an exclusive holder of k is a writer or
//      the mutex. Semaphore acquirers probe k with pg_try_advisory_lock (exclusive) once they hold q.
// A probe's exclusive try can also fail on another acquirer's probe of the same key (two readers
// probing q, two semaphore acquirers probing k); only then one more statement asks pg_locks who
// really holds the key. The probes do not see the session's own locks, so a lease never shares a
// session with a lease of the other kind and name (session_share::reserved routes it to a session
// of its own). q and w lie in the semaphore slots' key space at indexes no semaphore uses
// (max_semaphore_count is far below), so they are never a slot and never k.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "dlock_sql/pool.hpp"
#include "dlock_sql/session_lease.hpp"
#include "dlock_sql/session_share.hpp"

namespace dlock::pg {

// Who takes the name's key k.
enum class advisory_kind { mutex, writer, reader };

struct advisory_state {
  std::shared_ptr<sql::pool> connections;
  // The granting statements of k, per kind (index: advisory_kind): the advisory lock, the probe of
  // q and the fencing token in one statement (advisory.cpp says why); -1: the probe failed.
  std::string try_lock_sql[3], lock_sql[3], unlock_sql[3];
  // The probe of q and the token, for a session that holds k already (a wait that timed out in
  // the instant it was granted).
  std::string probe_token_sql;
  // After a failed probe of q: how many sessions hold q shared (semaphore leases), and the token
  // when none does.
  std::string semaphore_check_sql;
  // After a failed probe of k by a semaphore: the sessions that hold k (readers, writers, others)
  // that are not probing semaphore acquirers, and the token when none does.
  std::string lock_check_sql;
  // The semaphore's slots (two-int4 keys, arrays of them): publish q, take up to $3 of them, then
  // probe k and read the token when that completed the grant; release them all and q.
  std::string slots_try_sql, slots_unlock_sql;
  std::shared_ptr<sql::session_monitor> monitor = std::make_shared<sql::session_monitor>();
  // Leases share sessions (a session holds any number of advisory locks); waiters do not.
  std::unique_ptr<sql::session_share> share;
};

// "'name'" with bytes outside printable ASCII as '?' (for messages).
std::string describe(std::string_view name);

// Slot i's key of a semaphore of `name` (the 64 bits whose halves are the two int4 keys), and the
// name's marks q and w at slot indexes no semaphore uses.
std::int64_t semaphore_slot_key(std::string_view name, std::uint32_t slot);
inline constexpr std::uint32_t semaphore_mark_slot = 0xFFFFFFFFu;
inline constexpr std::uint32_t writer_mark_slot = 0xFFFFFFFEu;
// The int4 halves of a two-int4 key, and pg_locks' (classid, objid) of a key of either form.
std::int32_t high_of(std::int64_t key);
std::int32_t low_of(std::int64_t key);
std::int64_t classid_of(std::int64_t key);
std::int64_t objid_of(std::int64_t key);

// What a lease gives back at release: one statement on its session returning one row whose one
// column is 't' when every lock it names was still held, and the local reservations of its keys.
struct advisory_hold {
  std::string unlock_sql;
  std::vector<sql::param> params;
  std::vector<sql::key_reservation> reserved;
};

// A lease on `s` (under s->mutex(); counts itself in s->holders). On failure (out of memory) the
// session is ended, which frees its locks on the server, and ec is set.
std::unique_ptr<spi::lease_state> advisory_lease_on(const std::shared_ptr<advisory_state>& st,
                                                    std::shared_ptr<sql::session> s, std::string name,
                                                    const lock_options& options,
                                                    std::chrono::steady_clock::time_point start, std::uint64_t token,
                                                    advisory_hold hold, std::error_code& ec) noexcept;

// The keys of one name.
struct advisory_key {
  std::string name;             // the lock's name (messages, the lease)
  std::int64_t key;             // k: spi::sha256_int64(name)
  std::string key_text;         // k's local reservation
  std::int64_t semaphore_mark;  // q
  std::string mark_text;        // q's local reservation
  std::int64_t writer_mark;     // w
  static advisory_key of(std::string name);
};

// k in `kind`: `wait` false is one attempt, true waits (on the server) until `deadline`.
// nullptr without ec: held by others in a conflicting mode (or, for `wait`, until the deadline).
// nullptr with errc::name_conflict: the name's semaphore has permits held.
std::unique_ptr<spi::lease_state> acquire_advisory_key(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                       advisory_kind kind, const lock_options& options, bool wait,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       std::error_code& ec) noexcept;

// The token column of a granting statement (NULL or unreadable: nullopt).
std::optional<std::uint64_t> token_of(const sql::result& out);
// A cell as an integer (NULL or unreadable: nullopt).
std::optional<std::int64_t> int_of(const std::optional<std::string>& cell);

}  // namespace dlock::pg
