#pragma once
// The small abstract connection every SQL dialect provides (libpq for PostgreSQL, Connector/C++
// for MariaDB). The table strategies (strategies.hpp) are written once over this interface.
// std-only: client-library headers stay inside backends/<dialect>/.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

namespace dlock::sql {

// A binary value (bytea / VARBINARY): lock names are bound as bytes, so NUL bytes, quotes,
// backslashes, '%', '_' and non-ASCII are stored exactly and compared byte-wise (case-sensitive).
struct bytes {
  std::string data;
};

// One bound parameter. Lock names, owners and every other value are parameters, never SQL text.
using param = std::variant<std::monostate /* NULL */, std::int64_t, std::string /* text */, bytes>;

// One result row; a column is nullopt for SQL NULL, otherwise its text form (integers in decimal).
using row = std::vector<std::optional<std::string>>;

struct result {
  std::uint64_t rows_affected = 0;  // INSERT/UPDATE/DELETE; for SELECT/RETURNING: rows returned
  std::vector<row> rows;
};

// How a failed statement is classified. The strategies decide what each means for a lock
// (duplicate_key while inserting = "held"; lock_not_available on NOWAIT = "held").
enum class failure {
  none = 0,
  duplicate_key,       // PG 23505, MySQL 1062
  lock_not_available,  // PG 55P03 (NOWAIT, lock_timeout), MySQL 1205 / 3572
  deadlock,            // PG 40P01, MySQL 1213: retried by the strategies (index: 4 times), then "held"
  serialization,       // PG 40001: the same
  connection_lost,     // dropped, killed (PG 57P01, pg_terminate_backend; MySQL 2006/2013/1927)
  unreachable,         // connect failed / timed out
  auth_failed,         // PG 28P01/28000, MySQL 1045
  unknown_database,    // PG 3D000, MySQL 1049
  undefined_table,     // PG 42P01, MySQL 1146: the table is absent (create_table=false)
  other,               // anything else the server said
};

struct sql_error {
  failure kind = failure::none;
  std::string code;     // SQLSTATE or native error number, for the message
  std::string message;  // the server's / client's message. Never contains the password.
  explicit operator bool() const noexcept { return kind != failure::none; }
};

// The dlock::errc of a failure that is an error for the caller (not contention):
// auth_failed -> authentication_failed, connection_lost/unreachable -> backend_unavailable,
// everything else -> backend_error.
std::error_code to_error_code(failure f) noexcept;
// Sets ec and dlock's last error message: "<what>: <code> <message>".
void set_sql_error(std::error_code& ec, const sql_error& err, std::string_view what) noexcept;

// One connection. Not thread-safe: a connection is used by one thread at a time (the pool hands
// it out through an RAII handle). Every member is noexcept and reports through sql_error.
class connection {
 public:
  virtual ~connection() = default;

  // Runs one statement with its placeholders ($1.. for PostgreSQL, ? for MySQL) bound to
  // `params` in order. Returns false and fills `err` on failure.
  virtual bool execute(std::string_view sql, std::span<const param> params, result& out, sql_error& err) noexcept = 0;

  // Transactions (BEGIN / START TRANSACTION, COMMIT, ROLLBACK).
  virtual bool begin(sql_error& err) noexcept = 0;
  virtual bool commit(sql_error& err) noexcept = 0;
  virtual bool rollback(sql_error& err) noexcept = 0;

  // The session's row-lock wait bound (PG: SET lock_timeout; MySQL: innodb_lock_wait_timeout,
  // whole seconds, rounded up). zero() means NOWAIT-like: fail at once. nullopt: wait forever.
  virtual bool set_lock_wait_timeout(std::optional<std::chrono::milliseconds> timeout, sql_error& err) noexcept = 0;

  // False once a statement failed with connection_lost: the pool then drops it.
  virtual bool usable() const noexcept = 0;

  // Non-blocking, no round trip: false when the server has closed this session (killed,
  // terminated, shut down) as far as the client can tell from its socket. Polled for connections
  // held by leases (FOR UPDATE, advisory) to fire the lost notification. Default: "don't know".
  virtual bool poll_alive() noexcept { return true; }

  // The connection's socket, or -1 when unknown. Only shut down (never closed) by another
  // thread: session_lease cuts it when its lease is lost, so a statement stuck on a partitioned
  // link returns at once instead of after the kernel's TCP timeouts.
  virtual int native_socket() const noexcept { return -1; }
};

}  // namespace dlock::sql
