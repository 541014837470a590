// libpq: parameters are always bound (PQexecPrepared, names as binary bytea), never pasted.
#include "pg_connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "dlock/error.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/params.hpp"

namespace dlock::pg {

pg_settings pg_settings::from_uri(const uri& u) {
  pg_settings s;
  if (u.hosts().size() != 1)
    throw error(errc::invalid_uri, "expected exactly one host in " + u.redacted() +
                                       " (postgres+index://user:password@host:port/database)");
  s.host = u.hosts().front().host;
  s.port = u.hosts().front().port_or(5432);
  s.user = u.user();
  s.password = u.password().value_or("");
  s.database = u.path().empty() ? std::string() : u.path().substr(1);
  if (s.database.empty())
    throw error(errc::invalid_uri, "expected a database name as the path of " + u.redacted() +
                                       " (postgres+index://user:password@host:port/database)");
  if (auto m = u.get("sslmode")) {
    static const char* modes[] = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"};
    bool ok = false;
    for (auto* m2 : modes) ok = ok || *m == m2;
    if (!ok)
      throw error(errc::invalid_uri, "sslmode=" + *m +
                                         ": expected disable, allow, prefer, require, verify-ca or "
                                         "verify-full in " +
                                         u.redacted());
    s.sslmode = *m;
  }
  if (auto a = u.get("application_name")) {
    // PostgreSQL keeps at most 63 bytes and shows them to every user of pg_stat_activity.
    const bool printable = std::all_of(a->begin(), a->end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
    if (a->empty() || a->size() > 63 || !printable)
      throw error(errc::invalid_uri,
                  "application_name='" + *a + "': expected 1 to 63 printable ASCII characters in " + u.redacted());
    s.application_name = *a;
  }
  s.redacted_uri = u.redacted();
  return s;
}

const std::vector<std::string>& connection_parameters() {
  static const std::vector<std::string> keys{"sslmode", "application_name"};
  return keys;
}

sql::failure classify_sqlstate(std::string_view sqlstate) noexcept {
  using sql::failure;
  if (sqlstate == "23505" || sqlstate == "42P07" || sqlstate == "42710") return failure::duplicate_key;
  if (sqlstate == "55P03") return failure::lock_not_available;
  if (sqlstate == "40P01") return failure::deadlock;
  if (sqlstate == "40001") return failure::serialization;
  if (sqlstate.starts_with("57P0") || sqlstate.starts_with("08")) return failure::connection_lost;
  if (sqlstate == "28P01" || sqlstate == "28000") return failure::auth_failed;
  if (sqlstate == "3D000") return failure::unknown_database;
  if (sqlstate == "42P01") return failure::undefined_table;
  return failure::other;
}

namespace {
std::string trimmed(const char* s) {
  std::string m = s ? s : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}
}  // namespace

namespace {

// Drives libpq's non-blocking connect (PQconnectStartParams / PQconnectPoll) until `deadline`:
// libpq's own connect_timeout counts whole seconds (at least 2), too coarse for a caller's deadline
// (deadline.hpp). Inside an acquire that can be stopped, it looks at the stop request every
// stop_poll_slice; a connect begun after the stop request runs to its end (a withdrawal or a
// release may need it). False when the deadline passed or the stop came first.
bool poll_connect(PGconn* c, std::chrono::steady_clock::time_point deadline) noexcept {
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  const bool stoppable = spi::current_stop_token().stop_possible() && !spi::stop_requested();
  for (;;) {
    if (status == PGRES_POLLING_OK || status == PGRES_POLLING_FAILED) return true;
    if (stoppable && spi::stop_requested()) return false;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    left = std::min(left, stoppable ? spi::stop_poll_slice : std::chrono::milliseconds{60'000});
    pollfd fd{PQsocket(c), static_cast<short>(status == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    if (fd.fd < 0) return true;  // PQconnectPoll reports the failure
    const int ready = ::poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return true;
    if (ready == 0) continue;
    status = PQconnectPoll(c);
  }
}

}  // namespace

pgconn_ptr connect_raw(const pg_settings& s, std::chrono::milliseconds connect_timeout, sql::sql_error& err) noexcept {
  try {
    const auto deadline = std::chrono::steady_clock::now() + connect_timeout;
    const std::string port = std::to_string(s.port);
    const char* keys[] = {"host", "port", "user", "password", "dbname", "sslmode", "application_name", nullptr};
    const char* vals[] = {s.host.c_str(),
                          port.c_str(),
                          s.user.c_str(),
                          s.password.c_str(),
                          s.database.c_str(),
                          s.sslmode.c_str(),
                          s.application_name.c_str(),
                          nullptr};
    pgconn_ptr c(PQconnectStartParams(keys, vals, /*expand_dbname=*/0));
    if (!c) {
      err = {sql::failure::other, "", "libpq could not allocate a connection"};
      return nullptr;
    }
    // Server NOTICEs (e.g. "relation already exists, skipping" from CREATE ... IF NOT EXISTS) are
    // not errors; libpq would print them on stderr.
    PQsetNoticeProcessor(
        c.get(), [](void*, const char*) {}, nullptr);
    if (PQstatus(c.get()) != CONNECTION_BAD && !poll_connect(c.get(), deadline)) {
      if (spi::stop_requested())
        err = {sql::failure::unreachable, "", "the connect was abandoned: the acquire was asked to stop"};
      else
        err = {sql::failure::unreachable, "",
               "no answer within " + std::to_string(connect_timeout.count()) +
                   " ms (connect_timeout, or what was left of the caller's deadline)"};
      return nullptr;
    }
    if (PQstatus(c.get()) != CONNECTION_OK) {
      std::string m = trimmed(PQerrorMessage(c.get()));
      // libpq gives no SQLSTATE for a failed connection; its messages are stable across versions.
      if (m.find("password authentication failed") != std::string::npos ||
          m.find("authentication failed") != std::string::npos || m.find("no password supplied") != std::string::npos)
        err = {sql::failure::auth_failed, "28P01", "authentication failed for user \"" + s.user + "\""};
      else if (m.find("database \"") != std::string::npos && m.find("does not exist") != std::string::npos)
        err = {sql::failure::unknown_database, "3D000", "database \"" + s.database + "\" does not exist"};
      else
        err = {sql::failure::unreachable, "", m};
      return nullptr;
    }
    return c;
  } catch (...) {
    err = {sql::failure::other, "", "out of memory"};
    return nullptr;
  }
}

sql::connector make_connector(pg_settings s) {
  return
      [s = std::move(s)](std::chrono::milliseconds timeout, std::error_code& ec) -> std::unique_ptr<sql::connection> {
        sql::sql_error err;
        auto c = connect_raw(s, timeout, err);
        if (!c) {
          std::error_code e;
          if (err.kind == sql::failure::unknown_database) {
            set_error(ec, errc::backend_error, "connecting to " + s.redacted_uri + ": " + err.message);
          } else {
            sql::set_sql_error(ec, err, "connecting to " + s.redacted_uri);
          }
          return nullptr;
        }
        return std::make_unique<pg_connection>(std::move(c));
      };
}

pg_connection::pg_connection(pgconn_ptr c) noexcept : conn_(std::move(c)) {
  PQsetNoticeReceiver(
      conn_.get(),
      [](void* self, const PGresult* r) {
        const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity && (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0))
          static_cast<pg_connection*>(self)->fatal_seen_ = true;
      },
      this);
}

bool pg_connection::check(PGresult* raw, sql::result* out, sql::sql_error& err) noexcept {
  pgresult_ptr r(raw);
  if (guard_ && guard_->fired()) {
    err = cut_short();
    return false;
  }
  const auto status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    if (!out) return true;
    try {
      const int rows = PQntuples(r.get()), cols = PQnfields(r.get());
      out->rows.clear();
      out->rows.reserve(rows);
      for (int i = 0; i < rows; ++i) {
        sql::row row;
        row.reserve(cols);
        for (int j = 0; j < cols; ++j) {
          if (PQgetisnull(r.get(), i, j))
            row.emplace_back(std::nullopt);
          else
            row.emplace_back(std::string(PQgetvalue(r.get(), i, j), PQgetlength(r.get(), i, j)));
        }
        out->rows.push_back(std::move(row));
      }
      const char* n = PQcmdTuples(r.get());
      std::uint64_t affected = static_cast<std::uint64_t>(rows);
      if (n && *n) std::from_chars(n, n + std::strlen(n), affected);
      out->rows_affected = affected;
    } catch (...) {
      err = {sql::failure::other, "", "out of memory reading a result"};
      return false;
    }
    return true;
  }
  const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    usable_ = false;
    err = {sql::failure::connection_lost, state ? state : "", trimmed(PQerrorMessage(conn_.get()))};
    return false;
  }
  std::string msg = r ? trimmed(PQresultErrorMessage(r.get())) : trimmed(PQerrorMessage(conn_.get()));
  err = {state ? classify_sqlstate(state) : sql::failure::other, state ? state : "", std::move(msg)};
  if (err.kind == sql::failure::connection_lost) usable_ = false;
  return false;
}

pg_connection::statement_deadline::statement_deadline(pg_connection& c) noexcept
    : c_(c), guard_(PQsocket(c.conn_.get())) {
  c_.guard_ = &guard_;
  if (!sql::statements_stoppable()) return;
  cancel_.reset(PQgetCancel(c_.conn_.get()));  // here, on the connection's thread: libpq wants it so
  if (cancel_) on_stop_.emplace(spi::current_stop_token(), send_cancel{cancel_.get(), &guard_});
}

sql::sql_error pg_connection::cut_short() noexcept {
  usable_ = false;
  if (spi::stop_requested())
    return {sql::failure::connection_lost, "",
            "the statement outlived its cancel request: the connection was shut down"};
  return {sql::failure::connection_lost, "",
          "no answer by the caller's deadline (+" + std::to_string(sql::deadline_grace.count()) +
              " ms): the connection was shut down"};
}

bool pg_connection::statement_deadline::settle(bool ok, sql::sql_error& err) noexcept {
  on_stop_.reset();  // waits for a cancel request being sent, which may still move the cut
  if (!guard_.disarm() || !ok) return ok;
  err = c_.cut_short();
  return false;
}

void pg_connection::statement_deadline::send_cancel::operator()() const noexcept {
  char reason[256];
  (void)PQcancel(cancel, reason, sizeof reason);
  guard->cut_at(std::chrono::steady_clock::now() + cancel_grace);  // lost or failed: the socket goes
}

namespace {
// The failure of a statement not sent because its acquire was asked to stop first.
sql::sql_error stopped_before_sending() {
  return {sql::failure::other, "57014", "not sent: the acquire was asked to stop (canceling statement)"};
}
}  // namespace

bool pg_connection::simple(const char* sql, sql::sql_error& err) noexcept {
  statement_deadline d(*this);
  if (d.stopped_before_sending()) {
    err = stopped_before_sending();
    return false;
  }
  return d.settle(check(PQexec(conn_.get(), sql), nullptr, err), err);
}

namespace {
// Beyond this many distinct texts a connection stops preparing (a guard: a backend has about ten).
constexpr std::size_t max_prepared = 64;
}  // namespace

bool pg_connection::execute(std::string_view sql, std::span<const sql::param> params, sql::result& out,
                            sql::sql_error& err) noexcept {
  statement_deadline d(*this);
  if (d.stopped_before_sending()) {
    err = stopped_before_sending();
    return false;
  }
  return d.settle(execute_bounded(sql, params, out, err), err);
}

bool pg_connection::execute_bounded(std::string_view sql, std::span<const sql::param> params, sql::result& out,
                                    sql::sql_error& err) noexcept {
  try {
    // Values point into the caller's params (alive for the call; std::string data is
    // NUL-terminated as libpq's text format wants); only integers need their text form.
    std::vector<std::string> numbers(params.size());
    std::vector<const char*> values(params.size());
    std::vector<int> lengths(params.size()), formats(params.size());
    std::vector<Oid> types(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      if (std::holds_alternative<std::monostate>(p)) {
        values[i] = nullptr;
        types[i] = 0;
      } else if (auto* n = std::get_if<std::int64_t>(&p)) {
        numbers[i] = std::to_string(*n);
        values[i] = numbers[i].c_str();
        types[i] = 20;  // int8
      } else if (auto* t = std::get_if<std::string>(&p)) {
        values[i] = t->c_str();
        types[i] = 25;  // text
      } else {
        const auto& b = std::get<sql::bytes>(p).data;
        values[i] = b.data();
        lengths[i] = static_cast<int>(b.size());
        types[i] = 17;  // bytea, sent in binary: every byte (NUL included) as it is
        formats[i] = 1;
      }
    }
    const int n = static_cast<int>(params.size());
    auto it = prepared_.find(sql);
    // Parameterless statements (DDL, SET) run rarely: unnamed, as before; so does a text bound
    // with other types than when it was prepared, and anything past the cache bound.
    if (params.empty() || (it == prepared_.end() && prepared_.size() >= max_prepared) ||
        (it != prepared_.end() && it->second.types != types)) {
      const std::string text(sql);
      return check(PQexecParams(conn_.get(), text.c_str(), n, types.data(), values.data(), lengths.data(),
                                formats.data(), /*resultFormat text*/ 0),
                   &out, err);
    }
    for (int attempt = 0;; ++attempt) {
      if (it == prepared_.end()) {
        const std::string text(sql);
        std::string name = "dlock_" + std::to_string(next_statement_++);
        // A failed Parse (undefined table, syntax) reports here like a failed statement would.
        if (!check(PQprepare(conn_.get(), name.c_str(), text.c_str(), n, types.data()), nullptr, err)) return false;
        it = prepared_.emplace(text, prepared_statement{std::move(name), types}).first;
      }
      if (check(PQexecPrepared(conn_.get(), it->second.name.c_str(), n, values.data(), lengths.data(), formats.data(),
                               /*resultFormat text*/ 0),
                &out, err))
        return true;
      // 26000: the statement is gone from the session (DISCARD ALL / DEALLOCATE by someone else);
      // 0A000 "cached plan must not change result type": the table's columns changed. Forget it and
      // prepare again, at once when no transaction was aborted by the failure, else at the next call.
      if (err.code != "26000" && err.code != "0A000") return false;
      prepared_.erase(it);
      it = prepared_.end();
      if (attempt > 0 || PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) return false;
    }
  } catch (...) {
    err = {sql::failure::other, "", "out of memory binding parameters"};
    return false;
  }
}

bool pg_connection::set_lock_wait_timeout(std::optional<std::chrono::milliseconds> timeout,
                                          sql::sql_error& err) noexcept {
  // lock_timeout 0 means "wait forever" in PostgreSQL; "fail at once" is the smallest bound.
  std::string value = !timeout ? "0" : std::to_string(std::max<long long>(1, timeout->count())) + "ms";
  sql::param p{value};
  sql::result out;
  return execute("SELECT set_config('lock_timeout', $1, true)", std::span(&p, 1), out, err);
}

bool pg_connection::poll_alive() noexcept {
  if (!usable()) return false;
  pollfd fd{PQsocket(conn_.get()), POLLIN, 0};
  if (fd.fd < 0) return false;
  if (::poll(&fd, 1, 0) <= 0) return true;  // nothing arrived: nothing to say
  // Something arrived on an idle session: the server's FATAL before it closes (seen by the
  // notice receiver), or EOF; read until neither is pending.
  for (int i = 0; i < 4; ++i) {
    if (!PQconsumeInput(conn_.get()) || PQstatus(conn_.get()) != CONNECTION_OK || fatal_seen_) {
      usable_ = false;
      return false;
    }
    if (::poll(&fd, 1, 0) <= 0) break;
  }
  // A notice or a notification only: still alive. Drop queued notifications.
  while (PGnotify* n = PQnotifies(conn_.get())) PQfreemem(n);
  return true;
}

}  // namespace dlock::pg
