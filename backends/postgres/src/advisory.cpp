#include "advisory.hpp"

#include <algorithm>

#include "advisory_grant.hpp"
#include "advisory_primitives.hpp"
#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/connection.hpp"
#include "dlock_sql/deadline.hpp"
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
      : distributed_lock(std::move(name), with_primitives(postgres_advisory_caps, postgres_advisory_primitives),
                         std::move(o)),
        st_(std::move(st)),
        key_(advisory_key::of(std::string(this->name()))) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, advisory_kind::mutex, options(), false, clock::now(), ec);
  }
  // Within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return sql::wait_out_outages(deadline, options().poll, ec, [this](clock::time_point d, std::error_code& e) {
      return acquire_advisory_key(st_, key_, advisory_kind::mutex, options(), true, d, e);
    });
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
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override {
    return make_advisory_semaphore(st_, std::move(name), max_count, std::move(options));
  }
  // pg_locks on the name's advisory key k (int8: classid its high, objid its low 32 bits,
  // objsubid 1), in this database: the granted sessions hold, the others wait. A holder is named
  // by its server process ("pid <n>"): the lock records no owner id. The name's semaphore marks
  // are not looked at.
  lock_info do_inspect(const std::string& name) override {
    const auto rows = sessions_on(name);
    lock_info info;
    info.waiters_known = true;
    for (const auto& r : rows) {
      const auto owner = "pid " + r[0].value_or("?");
      const auto kind = r[2].value_or("") == "ShareLock" ? hold_kind::read : hold_kind::mutex;
      if (r[1].value_or("") == "t") {
        lock_holder h;
        h.owner = owner;
        h.kind = kind;
        info.holders.push_back(std::move(h));
      } else {
        info.waiters.push_back({owner, kind});
      }
    }
    return info;
  }
  // pg_terminate_backend of every session holding k: the server ends the session, which frees its
  // advisory locks -- all of them, also those of other names the session held (the pool shares
  // sessions between the leases of one backend object).
  std::vector<lock_holder> do_force_release(const std::string& name) override {
    auto info = do_inspect(name);
    std::vector<lock_holder> removed;
    for (auto& h : info.holders) {
      const auto pid = h.owner.substr(4);
      std::error_code ec;
      auto c = st_->connections->checkout(ec);
      if (!c) throw error(ec, last_error_message());
      sql::param p{static_cast<std::int64_t>(std::stoll(pid))};
      sql::result out;
      sql::sql_error err;
      if (!c->execute("SELECT pg_terminate_backend($1::int4)", std::span(&p, 1), out, err)) {
        sql::set_sql_error(ec, err, "terminating the session holding '" + name + "'");
        throw error(ec, last_error_message());
      }
      if (!out.rows.empty() && out.rows[0][0].value_or("") == "t") removed.push_back(std::move(h));
    }
    return removed;
  }
  std::vector<sql::row> sessions_on(const std::string& name) {
    std::error_code ec;
    auto c = st_->connections->checkout(ec);
    if (!c) throw error(ec, last_error_message());
    sql::param p{spi::sha256_int64(name)};
    sql::result out;
    sql::sql_error err;
    if (!c->execute("SELECT pid, granted, mode FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    " AND classid = ((($1::int8) >> 32) & 4294967295)::oid AND objid = (($1::int8) & 4294967295)::oid"
                    " ORDER BY granted DESC, pid",
                    std::span(&p, 1), out, err)) {
      sql::set_sql_error(ec, err, "inspecting '" + name + "' in pg_locks");
      throw error(ec, last_error_message());
    }
    return std::move(out.rows);
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
  if (!h->execute("SELECT to_regclass($1) IS NOT NULL", std::span(&p, 1), out, err))
    return false;  // let the DDL say why
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

std::shared_ptr<backend> make_advisory_backend(std::shared_ptr<sql::pool> connections, lock_options defaults,
                                               std::string redacted_uri, const advisory_sequence& sequence) {
  auto st = std::make_shared<advisory_state>();
  st->connections = std::move(connections);
  const std::string nextval = "nextval('" + sequence.qualified_name + "')";
  // The token is read in the very statement that takes the lock, so nextval runs while this
  // session holds it: a later holder, granted only after this session lost the lock, reads a
  // larger value. (A separate statement after the grant would not be ordered: the holder could
  // pause between the two.) The materialized CTE runs first; nextval only for a grant. Readers
  // (pg_advisory_lock_shared) read a token of their own from the same sequence: a writer granted
  // after a reader reads a larger one. Between the grant and the token, once k is held: the probe
  // of the semaphore mark q ($2, $3), in CASE order (advisory_grant.hpp); -1 when it fails.
  const std::string probe = "WHEN NOT pg_try_advisory_lock($2::int4, $3::int4) THEN -1"
                            " WHEN pg_advisory_unlock($2::int4, $3::int4) THEN " +
                            nextval + " END";
  const auto index = [](advisory_kind k) { return static_cast<std::size_t>(k); };
  st->try_lock_sql[index(advisory_kind::mutex)] =
      "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got) SELECT CASE WHEN NOT got THEN NULL " + probe +
      " FROM l";
  st->try_lock_sql[index(advisory_kind::reader)] =
      "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock_shared($1) AS got) SELECT CASE WHEN NOT got THEN NULL " +
      probe + " FROM l";
  // A writer holds its mark w ($4, $5) shared from before it takes k; nobody ever asks for w
  // exclusively, so taking it never waits. Not granted: w is given back in the same statement.
  st->try_lock_sql[index(advisory_kind::writer)] =
      "WITH m AS MATERIALIZED (SELECT pg_advisory_lock_shared($4::int4, $5::int4)),"
      " l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got FROM m)"
      " SELECT CASE WHEN NOT got THEN (CASE WHEN pg_advisory_unlock_shared($4::int4, $5::int4) THEN NULL::bigint "
      "END) " +
      probe + " FROM l";
  // The waiting statement bounds its own wait: lock_timeout (the last parameter) is set in the
  // first CTE, before the lock function starts waiting (the server reads it when the wait begins).
  const auto waiting = [&](const char* fn, const char* timeout, const std::string& before) {
    return "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', " + std::string(timeout) + ", false))," + before +
           " l AS MATERIALIZED (SELECT " + fn + "($1) FROM " + (before.empty() ? "t" : "m") + ") SELECT CASE " + probe +
           " FROM l";
  };
  st->lock_sql[index(advisory_kind::mutex)] = waiting("pg_advisory_lock", "$4", "");
  st->lock_sql[index(advisory_kind::reader)] = waiting("pg_advisory_lock_shared", "$4", "");
  st->lock_sql[index(advisory_kind::writer)] = waiting(
      "pg_advisory_lock", "$6", " m AS MATERIALIZED (SELECT pg_advisory_lock_shared($4::int4, $5::int4) FROM t),");
  st->unlock_sql[index(advisory_kind::mutex)] = "SELECT pg_advisory_unlock($1)";
  st->unlock_sql[index(advisory_kind::reader)] = "SELECT pg_advisory_unlock_shared($1)";
  // Both unlocks run (a sum, not AND, which the planner may cut short).
  st->unlock_sql[index(advisory_kind::writer)] =
      "SELECT pg_advisory_unlock($1)::int + pg_advisory_unlock_shared($2::int4, $3::int4)::int = 2";
  st->probe_token_sql = "SELECT CASE WHEN NOT pg_try_advisory_lock($1::int4, $2::int4) THEN -1"
                        " WHEN pg_advisory_unlock($1::int4, $2::int4) THEN " +
                        nextval + " END";
  // A failed probe of q: the sessions holding q shared are semaphore leases (or acquirers); an
  // exclusive holder of q is only another probe, of a mutex or rw lock of the name.
  st->semaphore_check_sql =
      "WITH s AS MATERIALIZED (SELECT count(DISTINCT pid) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted"
      " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 2 AND mode = 'ShareLock')"
      " SELECT n, CASE WHEN n = 0 THEN " +
      nextval + " END FROM s";
  // A failed probe of k by a semaphore acquirer: the sessions holding k ($1, $2), except those
  // holding q ($3, $4) shared (other acquirers probing k: a session never holds a lock of each kind
  // of one name), counted as readers (shared), writers (exclusive, holding w: $5, $6) and all
  // exclusive holders; the token when none is left.
  st->lock_check_sql =
      "WITH pl AS MATERIALIZED (SELECT pid, mode, classid, objid, objsubid FROM pg_locks WHERE locktype = 'advisory' "
      "AND granted"
      " AND ((classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1)"
      " OR (classid = $3::bigint::oid AND objid = $4::bigint::oid AND objsubid = 2)"
      " OR (classid = $5::bigint::oid AND objid = $6::bigint::oid AND objsubid = 2))),"
      " h AS MATERIALIZED (SELECT k.pid, k.mode FROM pl k WHERE k.objsubid = 1 AND k.classid = $1::bigint::oid"
      " AND k.objid = $2::bigint::oid AND NOT EXISTS (SELECT 1 FROM pl q WHERE q.pid = k.pid AND q.objsubid = 2"
      " AND q.classid = $3::bigint::oid AND q.objid = $4::bigint::oid AND q.mode = 'ShareLock'))"
      " SELECT (SELECT count(*) FROM h WHERE mode = 'ShareLock'),"
      " (SELECT count(*) FROM h WHERE mode = 'ExclusiveLock' AND EXISTS (SELECT 1 FROM pl w WHERE w.pid = h.pid"
      " AND w.objsubid = 2 AND w.classid = $5::bigint::oid AND w.objid = $6::bigint::oid)),"
      " (SELECT count(*) FROM h WHERE mode = 'ExclusiveLock'),"
      " CASE WHEN NOT EXISTS (SELECT 1 FROM h) THEN " +
      nextval + " END";
  // The semaphore's slots, as parallel arrays of the two int4 halves ($1, $2): the first $3 that
  // are free, in array order (the LIMIT stops the scan, so no slot past them is taken), and, when
  // that completed the grant, the probe of k ($7) and the token (read while every slot of it is
  // held). The first statement of an attempt ($6 = 1) publishes the semaphore mark q ($4, $5)
  // first; it fails only while a mutex or rw lock of the name probes q, and then takes nothing.
  // The two-int4 form is its own key space on the server (objsubid 2): never the mutex's or a
  // reader's key.
  st->slots_try_sql =
      "WITH p AS MATERIALIZED (SELECT CASE WHEN $6::int8 = 1 THEN pg_try_advisory_lock_shared($4::int4, $5::int4)"
      " ELSE true END AS published),"
      " c AS MATERIALIZED (SELECT ord FROM p, unnest($1::int4[], $2::int4[]) WITH ORDINALITY AS s(hi, lo, ord)"
      " WHERE CASE WHEN p.published THEN pg_try_advisory_lock(hi, lo) ELSE false END LIMIT $3::int)"
      " SELECT (SELECT published FROM p), array_agg(ord)::text, CASE WHEN count(*) = $3::int THEN"
      " CASE WHEN NOT pg_try_advisory_lock($7) THEN -1 WHEN pg_advisory_unlock($7) THEN " +
      nextval + " END END FROM c";
  // The slots and the mark, both always run; 't' when every one was held.
  st->slots_unlock_sql = "SELECT (SELECT coalesce(bool_and(pg_advisory_unlock(hi, lo)), true)"
                         " FROM unnest($1::int4[], $2::int4[]) AS s(hi, lo))::int"
                         " + pg_advisory_unlock_shared($3::int4, $4::int4)::int = 2";
  // Half the sessions leases may hold are shared by holders; the other half stay for callers that
  // wait on a session of their own.
  st->share = std::make_unique<sql::session_share>(
      st->connections, std::max<std::size_t>(1, st->connections->options().max_dedicated / 2));
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
