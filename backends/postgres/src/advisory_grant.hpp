#pragma once
// What postgres+advisory's three primitives share: the backend's state (pool, shared sessions,
// statements), the lease (advisory locks held on one session, released by one statement), and
// the acquisition of one key in a mode, which the mutex (exclusive), the reader-writer lock's
// writers (exclusive, the same key as the mutex of the same name) and its readers (shared) use.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "dlock_sql/pool.hpp"
#include "dlock_sql/session_lease.hpp"
#include "dlock_sql/session_share.hpp"

namespace dlock::pg {

enum class advisory_mode { exclusive,
                           shared };

struct advisory_state {
  std::shared_ptr<sql::pool> connections;
  // The granting statements of one key, per mode (index: advisory_mode): the advisory lock and the
  // fencing token in one statement (advisory.cpp says why).
  std::string try_lock_sql[2], lock_sql[2], unlock_sql[2];
  std::string token_sql;
  // The semaphore's slots (two-int4 keys, arrays of them): take up to $3 of them, then the token
  // when that completed the grant; release them all.
  std::string slots_try_sql, slots_unlock_sql;
  std::shared_ptr<sql::session_monitor> monitor = std::make_shared<sql::session_monitor>();
  // Leases share sessions (a session holds any number of advisory locks); waiters do not.
  std::unique_ptr<sql::session_share> share;
};

// "'name'" with bytes outside printable ASCII as '?' (for messages).
std::string describe(std::string_view name);

// What a lease gives back at release: one statement on its session returning one row whose one
// column is 't' when every lock it names was still held, and the local reservations of its keys.
struct advisory_hold {
  std::string unlock_sql;
  std::vector<sql::param> params;
  std::vector<sql::key_reservation> reserved;
};

// A lease on `s` (under s->mutex(); counts itself in s->holders). On failure (out of memory) the
// session is ended, which frees its locks on the server, and ec is set.
std::unique_ptr<spi::lease_state> advisory_lease_on(const std::shared_ptr<advisory_state>& st, std::shared_ptr<sql::session> s,
                                                    std::string name, const lock_options& options,
                                                    std::chrono::steady_clock::time_point start, std::uint64_t token,
                                                    advisory_hold hold, std::error_code& ec) noexcept;

// One key in one mode: `wait` false is one attempt, true waits (on the server) until `deadline`.
// nullptr without ec: held by others in a conflicting mode (or, for `wait`, until the deadline).
struct advisory_key {
  std::string name;      // the lock's name (messages, the lease)
  std::int64_t key;      // the advisory key: spi::sha256_int64(name)
  std::string key_text;  // the local reservation's key
};
std::unique_ptr<spi::lease_state> acquire_advisory_key(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                       advisory_mode mode, const lock_options& options, bool wait,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       std::error_code& ec) noexcept;

// The token column of a granting statement (NULL or unreadable: nullopt).
std::optional<std::uint64_t> token_of(const sql::result& out);

}  // namespace dlock::pg
