#include "advisory.hpp"

#include <algorithm>

#include "advisory_grant.hpp"
#include "advisory_primitives.hpp"
#include "capabilities.hpp"
#include "dlock_sql/params.hpp"
#include "dlock_sql/strategies.hpp"
#include "pg_connection.hpp"

namespace dlock::pg {
namespace {

// The mutex is the exclusive advisory lock on the name's key: the same lock as the reader-writer
// lock's write side of the same name (advisory_primitives.hpp).
class advisory_lock final : public distributed_lock {
 public:
  advisory_lock(std::shared_ptr<advisory_state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), with_primitives(postgres_advisory_caps, postgres_advisory_primitives), std::move(o)),
        st_(std::move(st)),
        key_{std::string(this->name()), spi::sha256_int64(this->name()), std::to_string(spi::sha256_int64(this->name()))} {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, advisory_mode::exclusive, options(), false, clock::now(), ec);
  }
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, advisory_mode::exclusive, options(), true, deadline, ec);
  }

  std::shared_ptr<advisory_state> st_;
  advisory_key key_;  // key_text: the advisory key, not the name (two names may share one)
};

class advisory_backend final : public backend {
 public:
  advisory_backend(std::shared_ptr<advisory_state> st, lock_options defaults, std::string redacted_uri)
      : backend(postgres_advisory_caps, postgres_advisory_primitives, lock_scope::network, name_limits{1 << 20},
                std::move(defaults), std::move(redacted_uri)),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<advisory_lock>(st_, std::move(name), std::move(options));
  }
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override {
    return make_advisory_rw_lock(st_, std::move(name), std::move(options));
  }
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count, lock_options options) override {
    return make_advisory_semaphore(st_, std::move(name), max_count, std::move(options));
  }
  std::shared_ptr<advisory_state> st_;
};

bool sequence_exists(sql::pool& connections, const std::string& qualified_name) {
  std::error_code ec;
  auto h = connections.checkout(ec);
  if (!h) throw error(ec, last_error_message());
  sql::param p{qualified_name};
  sql::result out;
  sql::sql_error err;
  if (!h->execute("SELECT to_regclass($1) IS NOT NULL", std::span(&p, 1), out, err)) return false;  // let the DDL say why
  return !out.rows.empty() && !out.rows[0].empty() && out.rows[0][0] == "t";
}

}  // namespace

advisory_sequence advisory_sequence::from_uri(const uri& u) {
  const auto identifier = [&](std::string_view key, std::string fallback) {
    const auto v = u.get(key);
    if (!v) return fallback;
    if (!sql::is_identifier(*v))
      throw error(errc::invalid_uri, std::string(key) + "=" + *v +
                                         ": expected an SQL identifier matching [A-Za-z_][A-Za-z0-9_]{0,62} in " +
                                         u.redacted());
    return *v;
  };
  const auto schema = identifier("schema", "");
  const auto name = identifier("sequence", "dlock_advisory_fence");
  advisory_sequence s;
  s.qualified_name = (schema.empty() ? "" : "\"" + schema + "\".") + "\"" + name + "\"";
  s.create = u.get_bool("create_sequence").value_or(true);
  if (!schema.empty()) s.create_ddl.push_back("CREATE SCHEMA IF NOT EXISTS \"" + schema + "\"");
  s.create_ddl.push_back("CREATE SEQUENCE IF NOT EXISTS " + s.qualified_name);
  return s;
}

std::shared_ptr<backend> make_advisory_backend(std::shared_ptr<sql::pool> connections, lock_options defaults, std::string redacted_uri,
                                               const advisory_sequence& sequence) {
  auto st = std::make_shared<advisory_state>();
  st->connections = std::move(connections);
  const std::string seq = sequence.qualified_name;
  // The token is read in the very statement that takes the lock, so nextval runs while this
  // session holds it: a later holder, granted only after this session lost the lock, reads a
  // larger value. (A separate statement after the grant would not be ordered: the holder could
  // pause between the two.) The materialized CTE runs first; nextval only for a grant. Readers
  // (pg_advisory_lock_shared) read a token of their own from the same sequence: a writer granted
  // after a reader reads a larger one.
  for (const auto& [m, suffix] : {std::pair{0, ""}, std::pair{1, "_shared"}}) {
    const std::string fn = std::string("pg_advisory_lock") + suffix;
    st->try_lock_sql[m] = "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock" + std::string(suffix) +
                          "($1) AS got) SELECT CASE WHEN got THEN nextval('" + seq + "') END FROM l";
    // The waiting statement bounds its own wait: lock_timeout ($2) is set in the first CTE, before
    // the lock function starts waiting (the server reads it when the wait begins).
    st->lock_sql[m] = "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false)),"
                      " l AS MATERIALIZED (SELECT " + fn + "($1) FROM t) SELECT nextval('" + seq + "') FROM l";
    st->unlock_sql[m] = "SELECT pg_advisory_unlock" + std::string(suffix) + "($1)";
  }
  st->token_sql = "SELECT nextval('" + seq + "')";
  // The semaphore's slots, as parallel arrays of the two int4 halves ($1, $2): the first $3 that
  // are free, in array order (the LIMIT stops the scan, so no slot past them is taken), and the
  // token only when that completed the grant (read while every slot of it is held). The two-int4
  // form is its own key space on the server (objsubid 2): never the mutex's or a reader's key.
  st->slots_try_sql = "WITH c AS MATERIALIZED (SELECT ord FROM unnest($1::int4[], $2::int4[]) WITH ORDINALITY AS s(hi, lo, ord)"
                      " WHERE pg_try_advisory_lock(hi, lo) LIMIT $3::int)"
                      " SELECT array_agg(ord)::text, CASE WHEN count(*) = $3::int THEN nextval('" + seq + "') END FROM c";
  st->slots_unlock_sql = "SELECT coalesce(bool_and(pg_advisory_unlock(hi, lo)), false)"
                         " FROM unnest($1::int4[], $2::int4[]) AS s(hi, lo)";
  // Half the sessions leases may hold are shared by holders; the other half stay for callers that
  // wait on a session of their own.
  st->share = std::make_unique<sql::session_share>(st->connections,
                                                   std::max<std::size_t>(1, st->connections->options().max_dedicated / 2));
  // Connect once now so wrong credentials / an unknown database fail at open; create the sequence
  // unless it exists (an existing sequence needs no CREATE privilege: a least-privileged user
  // that had none before keeps working once an administrator created it).
  if (sequence.create && !sequence_exists(*st->connections, sequence.qualified_name)) {
    sql::run_ddl(*st->connections, sequence.create_ddl, redacted_uri, "creating the fencing sequence",
                 "set create_sequence=false if an administrator creates it; DDL in the README");
  } else {
    std::error_code ec;
    auto h = st->connections->checkout(ec);
    if (!h) throw error(ec, last_error_message());
  }
  return std::make_shared<advisory_backend>(std::move(st), std::move(defaults), std::move(redacted_uri));
}

}  // namespace dlock::pg
