#include "pg_probe.hpp"

#include "advisory_primitives.hpp"

#include <stdexcept>

#include "dlock/spi.hpp"
#include "dlock/uri.hpp"
#include "pg_sql.hpp"

namespace dlock::pg::testing {

pgconn_ptr connect(const std::string& uri_text) {
  auto s = pg_settings::from_uri(uri::parse(uri_text));
  sql::sql_error err;
  auto c = connect_raw(s, std::chrono::seconds{5}, err);
  if (!c) throw std::runtime_error("test probe cannot connect to " + s.redacted_uri + ": " + err.message);
  return c;
}

sql::result exec(PGconn* c, const std::string& sql, std::vector<sql::param> params) {
  // The same binding as pg_connection::execute, on a handle the caller keeps owning.
  std::vector<std::string> text(params.size());
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size()), formats(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (auto* n = std::get_if<std::int64_t>(&params[i]))
      text[i] = std::to_string(*n);
    else if (auto* t = std::get_if<std::string>(&params[i]))
      text[i] = *t;
    else if (auto* b = std::get_if<sql::bytes>(&params[i])) {
      text[i] = b->data;
      formats[i] = 1;
    }
    values[i] = std::holds_alternative<std::monostate>(params[i]) ? nullptr : text[i].data();
    lengths[i] = static_cast<int>(text[i].size());
  }
  pgresult_ptr r(PQexecParams(c, sql.c_str(), static_cast<int>(params.size()), nullptr, values.data(), lengths.data(),
                              formats.data(), 0));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const char* code = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    throw std::runtime_error(std::string("test probe: ") + (code ? code : "") + " " + PQresultErrorMessage(r.get()) +
                             " in: " + sql);
  }
  sql::result out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    sql::row row;
    for (int j = 0; j < PQnfields(r.get()); ++j)
      row.emplace_back(PQgetisnull(r.get(), i, j) ? std::nullopt
                                                  : std::optional<std::string>(PQgetvalue(r.get(), i, j)));
    out.rows.push_back(std::move(row));
  }
  const char* n = PQcmdTuples(r.get());
  out.rows_affected = (n && *n) ? std::stoull(n) : out.rows.size();
  return out;
}

std::string table_of(const std::string& uri_text, std::string_view default_table) {
  auto u = uri::parse(uri_text);
  sql::table_ref t{u.get("schema").value_or(""), u.get("table").value_or(std::string(default_table))};
  return qualified(t);
}

namespace {
std::int64_t key_of(std::string_view name) { return spi::sha256_int64(name); }
std::int64_t high(std::int64_t k) { return static_cast<std::int64_t>(static_cast<std::uint64_t>(k) >> 32); }
std::int64_t low(std::int64_t k) { return static_cast<std::int64_t>(static_cast<std::uint64_t>(k) & 0xffffffffu); }
// The semaphore slots of a name, for any max_count up to probed_slots: pids holding one of them.
constexpr std::uint32_t probed_slots = 1024;
const char* slot_holders_sql = "SELECT l.pid FROM pg_locks l JOIN unnest($1::bigint[], $2::bigint[]) AS s(hi, lo)"
                               " ON l.classid = s.hi::oid AND l.objid = s.lo::oid"
                               " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2";
std::vector<sql::param> slot_params(std::string_view name) {
  std::string hi = "{", lo = "{";
  for (std::uint32_t i = 0; i < probed_slots; ++i) {
    const auto k = semaphore_slot_key(name, i);
    hi += (i ? "," : "") + std::to_string(high(k));
    lo += (i ? "," : "") + std::to_string(low(k));
  }
  return {hi + "}", lo + "}"};
}
const char* advisory_holder =
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1::bigint::oid"
    " AND objid = $2::bigint::oid AND objsubid = 1";
// Whether `table` has a row of `name` for which `condition` holds (a table scheme's live grant).
bool has_row(PGconn* c, const std::string& table, const std::string& name, const std::string& condition) {
  return !exec(c, "SELECT 1 FROM " + table + " WHERE name = $1 AND " + condition, {sql::bytes{name}}).rows.empty();
}

}  // namespace

bool held_on_server(const std::string& uri_text, std::string_view name) {
  auto u = uri::parse(uri_text);
  auto c = connect(uri_text);
  const std::string n(name);
  if (u.scheme() == "postgres+advisory")
    return !exec(c.get(), advisory_holder, {high(key_of(name)), low(key_of(name))}).rows.empty() ||
           !exec(c.get(), slot_holders_sql, slot_params(name)).rows.empty();
  if (u.scheme() == "postgres+index")
    return has_row(c.get(), table_of(uri_text, "dlock_index"), n, "expires_at > clock_timestamp()");
  if (u.scheme() == "postgres+version")
    return has_row(c.get(), table_of(uri_text, "dlock_version"), n,
                   "owner IS NOT NULL AND expires_at > clock_timestamp()");
  // forupdate: held iff the row is locked by an open transaction (NOWAIT probe).
  exec(c.get(), "BEGIN");
  try {
    exec(c.get(), "SELECT 1 FROM " + table_of(uri_text, "dlock_forupdate") + " WHERE name = $1 FOR UPDATE NOWAIT",
         {sql::bytes{n}});
  } catch (const std::runtime_error& e) {
    exec(c.get(), "ROLLBACK");
    if (std::string(e.what()).find("55P03") != std::string::npos) return true;
    throw;
  }
  exec(c.get(), "ROLLBACK");
  return false;
}

int break_lock(const std::string& uri_text, std::string_view name) {
  auto u = uri::parse(uri_text);
  auto c = connect(uri_text);
  const std::string n(name);
  std::vector<sql::row> rows;
  if (u.scheme() == "postgres+advisory") {
    // Every session holding the name: the mutex's or rw lock's key (several readers), or a slot
    // of the semaphore of that name.
    rows = exec(c.get(), advisory_holder, {high(key_of(name)), low(key_of(name))}).rows;
    auto slots = exec(c.get(), slot_holders_sql, slot_params(name)).rows;
    rows.insert(rows.end(), slots.begin(), slots.end());
    if (rows.empty()) throw std::runtime_error("break_lock: no holder session found");
    for (std::size_t i = 1; i < rows.size(); ++i)
      exec(c.get(), "SELECT pg_terminate_backend($1::int)", {std::int64_t{std::stoi(*rows[i][0])}});
  } else if (u.scheme() == "postgres+forupdate") {
    // The holder's transaction updated the row (fence + 1): its xid is the row's xmax.
    rows = exec(c.get(),
                "SELECT a.pid FROM pg_stat_activity a, " + table_of(uri_text, "dlock_forupdate") +
                    " t WHERE t.name = $1 AND a.backend_xid = t.xmax",
                {sql::bytes{n}})
               .rows;
  } else {
    // Table schemes: the grant is the row, not a session. An operator deletes the row.
    auto table = table_of(uri_text, u.scheme() == "postgres+index" ? "dlock_index" : "dlock_version");
    if (u.scheme() == "postgres+index")
      exec(c.get(), "DELETE FROM " + table + " WHERE name = $1", {sql::bytes{n}});
    else
      exec(c.get(), "UPDATE " + table + " SET owner = NULL, expires_at = NULL, version = version + 1 WHERE name = $1",
           {sql::bytes{n}});
    return 0;
  }
  if (rows.empty() || rows[0].empty() || !rows[0][0]) throw std::runtime_error("break_lock: no holder session found");
  const int pid = std::stoi(*rows[0][0]);
  exec(c.get(), "SELECT pg_terminate_backend($1::int)", {std::int64_t{pid}});
  return pid;
}

namespace {
std::vector<advisory_row> rows_of(const sql::result& r) {
  std::vector<advisory_row> out;
  for (const auto& row : r.rows) out.push_back({std::stoi(*row[0]), *row[1], *row[2] == "t"});
  return out;
}
}  // namespace

std::vector<advisory_row> advisory_rows(const std::string& uri_text, std::string_view name) {
  auto c = connect(uri_text);
  return rows_of(
      exec(c.get(),
           "SELECT pid, mode, granted FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::bigint::oid"
           " AND objid = $2::bigint::oid AND objsubid = 1",
           {high(key_of(name)), low(key_of(name))}));
}

std::vector<advisory_row> slot_rows(const std::string& uri_text, std::string_view name, std::uint32_t slots) {
  auto c = connect(uri_text);
  std::vector<advisory_row> out;
  for (std::uint32_t i = 0; i < slots; ++i) {
    const auto k = semaphore_slot_key(name, i);
    auto rows =
        rows_of(exec(c.get(),
                     "SELECT pid, mode, granted FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::bigint::oid"
                     " AND objid = $2::bigint::oid AND objsubid = 2",
                     {high(k), low(k)}));
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

void terminate(const std::string& uri_text, int pid) {
  auto c = connect(uri_text);
  exec(c.get(), "SELECT pg_terminate_backend($1::int)", {std::int64_t{pid}});
}

}  // namespace dlock::pg::testing
