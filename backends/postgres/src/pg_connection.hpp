#pragma once
// One libpq connection as an sql::connection, the settings parsed from a postgres*:// URI, and
// the SQLSTATE classification. libpq headers stay inside this folder.
#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlock/acquire_stop.hpp"
#include "dlock/uri.hpp"
#include "dlock_sql/connection.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::pg {

struct pg_settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 5432;
  std::string user;
  std::string password;  // never formatted into a message
  std::string database;
  std::string sslmode = "prefer";  // URI sslmode=disable|prefer|require|verify-ca|verify-full
  // URI application_name=: how our sessions show in pg_stat_activity (an operator tells which
  // service holds which lock session; a test kills only its own).
  std::string application_name = "dlock";
  std::string redacted_uri;

  static pg_settings from_uri(const uri& u);
};

// URI keys the connection understands beyond sql::common_parameter_names(): sslmode, application_name.
const std::vector<std::string>& connection_parameters();

// SQLSTATE -> failure (23505 duplicate_key, 55P03 lock_not_available, 40P01 deadlock, 40001
// serialization, 57P0x/08xxx connection_lost, 28P01/28000 auth_failed, 3D000 unknown_database,
// 42P01 undefined_table; 42P07/42710 (a concurrent CREATE ... IF NOT EXISTS) count as duplicate_key).
sql::failure classify_sqlstate(std::string_view sqlstate) noexcept;

struct pgconn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using pgconn_ptr = std::unique_ptr<PGconn, pgconn_deleter>;
struct pgresult_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using pgresult_ptr = std::unique_ptr<PGresult, pgresult_deleter>;

// Opens a raw libpq connection (for the connection class, the listener, tests and benchmarks).
// nullptr with `err` set (auth_failed / unknown_database / unreachable) on failure.
pgconn_ptr connect_raw(const pg_settings& s, std::chrono::milliseconds connect_timeout, sql::sql_error& err) noexcept;

class pg_connection final : public sql::connection {
 public:
  // Installs a notice receiver on the connection: a FATAL arriving on an idle session (libpq
  // passes it as a notice; pg_terminate_backend, shutdown) marks the connection dead.
  explicit pg_connection(pgconn_ptr c) noexcept;
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;

  bool execute(std::string_view sql, std::span<const sql::param> params, sql::result& out,
               sql::sql_error& err) noexcept override;
  bool begin(sql::sql_error& err) noexcept override { return simple("BEGIN", err); }
  bool commit(sql::sql_error& err) noexcept override { return simple("COMMIT", err); }
  bool rollback(sql::sql_error& err) noexcept override { return simple("ROLLBACK", err); }
  // SET LOCAL lock_timeout (through set_config(..., true)): call inside a transaction.
  bool set_lock_wait_timeout(std::optional<std::chrono::milliseconds> timeout, sql::sql_error& err) noexcept override;
  bool usable() const noexcept override { return usable_ && !fatal_seen_ && PQstatus(conn_.get()) == CONNECTION_OK; }
  bool poll_alive() noexcept override;
  int native_socket() const noexcept override { return PQsocket(conn_.get()); }

  PGconn* raw() const noexcept { return conn_.get(); }

 private:
  bool simple(const char* sql, sql::sql_error& err) noexcept;
  // execute() inside the statement_deadline that execute() holds.
  bool execute_bounded(std::string_view sql, std::span<const sql::param> params, sql::result& out,
                       sql::sql_error& err) noexcept;
  bool check(PGresult* r, sql::result* out, sql::sql_error& err) noexcept;
  // The failure of a statement whose socket the deadline or a stop request shut down.
  sql::sql_error cut_short() noexcept;

  // Inside an acquire's deadline scope (dlock_sql/deadline.hpp): the statement's socket is shut
  // down if it has not answered by the deadline + grace; check() then reports that.
  // The statement's bounds: the deadline's socket guard and, for a statement that waits for a lock
  // (sql::stoppable_statements), a cancel request sent to the server when the acquire is asked to
  // stop: the server ends the wait at once and the session stays usable. A cancel request that
  // reaches the server before the statement does finds nothing to cancel: if the statement still
  // runs cancel_grace later, its socket is shut down (the session ends, and any lock it was
  // granted goes with it).
  struct statement_deadline {
    explicit statement_deadline(pg_connection& c) noexcept;
    ~statement_deadline() { c_.guard_ = nullptr; }
    statement_deadline(const statement_deadline&) = delete;
    statement_deadline& operator=(const statement_deadline&) = delete;
    // A stop request that came before the statement was sent (its cancel request found nothing to
    // cancel): the statement must not be sent.
    bool stopped_before_sending() const noexcept { return on_stop_.has_value() && spi::stop_requested(); }
    // The statement's outcome `ok`, once no cancel request and no cut can come any more: false
    // with `err` set when the socket was shut down, even after a good answer (the session ends on
    // the server all the same, and an advisory lock or a row lock it was granted goes with it).
    bool settle(bool ok, sql::sql_error& err) noexcept;

    static constexpr std::chrono::milliseconds cancel_grace{250};
    struct send_cancel {
      PGcancel* cancel;
      sql::socket_guard* guard;
      void operator()() const noexcept;
    };
    struct cancel_deleter {
      void operator()(PGcancel* c) const noexcept { PQfreeCancel(c); }
    };
    pg_connection& c_;
    sql::socket_guard guard_;
    std::unique_ptr<PGcancel, cancel_deleter> cancel_;  // outlives on_stop_, which uses it
    std::optional<std::stop_callback<send_cancel>> on_stop_;
  };
  sql::socket_guard* guard_ = nullptr;

  pgconn_ptr conn_;
  // Statements with parameters are prepared once per connection (PQprepare: one extra round trip
  // the first time), then run with PQexecPrepared: the server parses and plans each text once
  // instead of at every call (PQexecParams' unnamed statement), 1.4-2.6x the throughput at 8
  // threads. Key: SQL text + parameter types; value: the server-side statement name. Bounded:
  // a backend runs a fixed set of texts (names are bound, never part of the text).
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  struct prepared_statement {
    std::string name;
    std::vector<Oid> types;  // a call binding other types (a NULL) runs unnamed instead
  };
  std::unordered_map<std::string, prepared_statement, text_hash, std::equal_to<>> prepared_;
  std::uint64_t next_statement_ = 0;
  bool usable_ = true;
  bool fatal_seen_ = false;
};

// The pool's connector for these settings.
sql::connector make_connector(pg_settings s);

}  // namespace dlock::pg
