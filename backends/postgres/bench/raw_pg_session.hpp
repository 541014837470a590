#pragma once
// For the postgres benches (postgres_bench, primitives_bench): a raw libpq session sending what
// pg_connection sends, so that dlock is compared with a client doing the same work. A statement
// with parameters is prepared once per connection (PQprepare, the first time only), then run with
// PQexecPrepared, parameters as text (int8, text) or binary (bytea) like the backend's; BEGIN and
// COMMIT go through PQexec (simple query protocol).
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "dlock/dlock.hpp"
#include "pg_connection.hpp"

namespace dlock::pg::bench {

class raw_pg_session {
 public:
  explicit raw_pg_session(const std::string& uri) {
    dlock::sql::sql_error err;
    // 60 s: 128 connecting at once on a loaded box take a while.
    c_ =
        dlock::pg::connect_raw(dlock::pg::pg_settings::from_uri(dlock::uri::parse(uri)), std::chrono::seconds{60}, err);
    if (!c_) throw std::runtime_error("connect: " + err.message);
  }

  // One statement; returns the first value of the first row ("" for none or NULL).
  std::string exec(const std::string& sql, const std::vector<dlock::sql::param>& ps) {
    std::vector<std::string> text(ps.size());
    std::vector<const char*> values(ps.size());
    std::vector<int> lengths(ps.size()), formats(ps.size());
    std::vector<Oid> types(ps.size());
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (auto* n = std::get_if<std::int64_t>(&ps[i]))
        text[i] = std::to_string(*n), types[i] = 20;
      else if (auto* t = std::get_if<std::string>(&ps[i]))
        text[i] = *t, types[i] = 25;
      else
        text[i] = std::get<dlock::sql::bytes>(ps[i]).data, types[i] = 17, formats[i] = 1;
      values[i] = text[i].data();
      lengths[i] = static_cast<int>(text[i].size());
    }
    const int n = static_cast<int>(ps.size());
    auto& name = names_[sql];
    if (name.empty()) {
      name = "s" + std::to_string(names_.size());
      dlock::pg::pgresult_ptr p(PQprepare(c_.get(), name.c_str(), sql.c_str(), n, types.data()));
      if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) throw std::runtime_error(PQresultErrorMessage(p.get()));
    }
    dlock::pg::pgresult_ptr r(
        PQexecPrepared(c_.get(), name.c_str(), n, values.data(), lengths.data(), formats.data(), 0));
    auto st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw std::runtime_error(PQresultErrorMessage(r.get()));
    // PQgetvalue gives "" for NULL.
    return PQntuples(r.get()) && PQnfields(r.get()) ? PQgetvalue(r.get(), 0, 0) : "";
  }

  // pg_connection::begin/commit: PQexec (simple query protocol).
  void simple(const char* sql) {
    dlock::pg::pgresult_ptr r(PQexec(c_.get(), sql));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) throw std::runtime_error(PQresultErrorMessage(r.get()));
  }

 private:
  dlock::pg::pgconn_ptr c_;
  std::map<std::string, std::string> names_;  // statement text -> prepared statement name
};

}  // namespace dlock::pg::bench
