#include "advisory.hpp"

#include <algorithm>
#include <optional>
#include <stop_token>

#include "capabilities.hpp"

#include "dlock_sql/params.hpp"
#include "dlock_sql/session_lease.hpp"
#include "dlock_sql/session_share.hpp"
#include "dlock_sql/strategies.hpp"
#include "pg_connection.hpp"

namespace dlock::pg {
namespace {

struct state {
  std::shared_ptr<sql::pool> connections;
  // The granting statements: the advisory lock and the fencing token in one statement (below).
  std::string try_lock_sql, lock_sql, token_sql;
  std::shared_ptr<sql::session_monitor> monitor = std::make_shared<sql::session_monitor>();
  // Leases share sessions (a session holds any number of advisory locks); waiters do not.
  std::unique_ptr<sql::session_share> share;
};

std::string describe(std::string_view name) {
  std::string out = "'";
  for (unsigned char c : name) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out + "'";
}

std::optional<std::uint64_t> token_of(const sql::result& out) {
  if (out.rows.empty() || out.rows[0].empty() || !out.rows[0][0]) return std::nullopt;
  try {
    return std::stoull(*out.rows[0][0]);
  } catch (...) {
    return std::nullopt;
  }
}

// The lock is the session's: the session monitor (sql_common) confirms the session every ttl/3
// and the lease's validity runs out on its own when it cannot. The session may be shared with
// other leases (session_share.hpp); the lease holds its key's local reservation until released
// or lost, so no other lease of this process can stack the same key on the same session.
class advisory_lease final : public sql::session_lease {
 public:
  // Under s->mutex(), s->holders already counting this lease.
  advisory_lease(std::shared_ptr<state> st, std::string name, std::chrono::milliseconds ttl, clock::time_point start,
                 bool confirm, std::int64_t key, std::uint64_t token, std::shared_ptr<sql::session> s,
                 sql::key_reservation reserved)
      : session_lease(st->monitor, std::move(name), ttl, start, confirm, s),
        st_(std::move(st)),
        key_(key),
        token_(token),
        reserved_(std::move(reserved)),
        free_when_lost_(std::in_place, lost_token(), sql::free_key_when_lost{s->conn() ? s->conn()->native_socket() : -1, &reserved_}) {}
  ~advisory_lease() override {
    stop_watching();
    {
      std::lock_guard lk(connection_mutex());
      if (connection()) unlock_and_leave(nullptr);
      else end_session(false);
    }
    free_when_lost_.reset();
    reserved_.reset();
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 private:
  // pg_advisory_unlock on the lease's session. A session the statement failed on is ended (it
  // may still hold the lock, and with it every lease on it is lost), never returned to the pool.
  bool unlock_and_leave(std::error_code* ec) noexcept {
    sql::param p{key_};
    sql::result out;
    sql::sql_error err;
    const auto start = clock::now();
    bool ok = connection()->execute("SELECT pg_advisory_unlock($1)", std::span(&p, 1), out, err);
    bool was_held = ok && !out.rows.empty() && !out.rows[0].empty() && out.rows[0][0] == "t";
    if (ok) shared_session().answered(start);
    end_session(ok);
    free_when_lost_.reset();
    reserved_.reset();  // only now: the session no longer holds the key
    if (ec && !ok) sql::set_sql_error(*ec, err, release_label());
    if (ec && ok && !was_held)
      set_error(*ec, errc::not_owner, release_label() + ": the session no longer held it");
    return ok && was_held;
  }
  void release_session(std::error_code& ec) noexcept override {
    unlock_and_leave(&ec);
    if (ec == errc::backend_unavailable) ec = make_error_code(errc::not_owner);
  }
  void left_session() noexcept override {
    free_when_lost_.reset();
    reserved_.reset();  // only now: the session no longer holds the key, or is shut down
  }
  std::string release_label() const override { return "releasing advisory lock " + describe(name()); }
  std::string_view freed_with_session() const noexcept override {
    return "its session ended, and PostgreSQL released the lock then";
  }

  std::shared_ptr<state> st_;  // the key guard reserved_ points into outlives the lease
  std::int64_t key_;
  std::uint64_t token_;
  sql::key_reservation reserved_;
  std::optional<std::stop_callback<sql::free_key_when_lost>> free_when_lost_;
};

class advisory_lock final : public distributed_lock {
 public:
  advisory_lock(std::shared_ptr<state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), postgres_advisory_caps, std::move(o)),
        st_(std::move(st)),
        key_(spi::sha256_int64(this->name())),
        key_text_(std::to_string(key_)) {}

 private:
  // Under s->mutex().
  std::unique_ptr<spi::lease_state> lease_on(std::shared_ptr<sql::session> s, clock::time_point start,
                                             std::uint64_t token, sql::key_reservation reserved,
                                             std::error_code& ec) noexcept {
    try {
      ++s->holders;
      return std::make_unique<advisory_lease>(st_, std::string(name()), options().ttl, start, options().watchdog, key_,
                                              token, s, std::move(reserved));
    } catch (...) {
      s->end();  // it holds the lock: the session ends (the server frees it)
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  // Try first, on a shared session: one statement takes the lock and, only if granted, reads the
  // token (NULL: not granted). `granted` false without ec: held by another session.
  std::unique_ptr<spi::lease_state> try_shared(sql::key_reservation& reserved, clock::time_point deadline,
                                               std::error_code& ec) noexcept {
    auto picked = st_->share->pick(deadline, ec);
    if (!picked.s) return nullptr;
    auto& s = *picked.s;
    const auto start = clock::now();
    sql::param p{key_};
    sql::result out;
    sql::sql_error err;
    if (!s.conn()->execute(st_->try_lock_sql, std::span(&p, 1), out, err)) {
      // The lock may have been taken before the token failed (a failed statement keeps a session
      // lock). This process reserved the key, so the session holds it at most once: one unlock
      // cleans it; when even that fails the session ends, with every lease on it.
      sql::set_sql_error(ec, err, "acquiring advisory lock " + describe(name()));
      sql::sql_error ignored;
      sql::result none;
      if (!s.conn()->usable() || !s.conn()->execute("SELECT pg_advisory_unlock($1)", std::span(&p, 1), none, ignored))
        s.end();
      return nullptr;
    }
    s.answered(start);
    if (out.rows.empty() || out.rows[0].empty() || !out.rows[0][0]) return nullptr;  // held elsewhere
    const auto token = token_of(out);
    if (!token) {
      s.end();
      set_error(ec, errc::backend_error, "acquiring advisory lock " + describe(name()) + ": unreadable fencing token");
      return nullptr;
    }
    return lease_on(std::move(picked.s), start, *token, std::move(reserved), ec);
  }

  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    // Held by another lease of this process: no round trip (and never a stacked grant).
    if (!st_->share->reserve(key_text_, clock::now())) return nullptr;
    sql::key_reservation reserved(st_->share.get(), key_text_);
    return try_shared(reserved, clock::now() + st_->connections->options().checkout_timeout, ec);
  }

  // Try first (one round trip on a shared session); only when that fails, wait on a session of
  // our own, which the server queues: a session blocked in pg_advisory_lock could not run another
  // lease's unlock, so waiting never happens on a shared one. At most one caller per key and
  // process waits on the server; the others wait for its local reservation.
  // The bound (lock_timeout) is set in the waiting statement itself: no round trip to set it and
  // none to reset it (a session-level setting that stays on this session, and is rolled back with
  // a statement that times out; the statements run on sessions later never wait on a lock).
  // A 55P03 can race with the grant (DistributedLock #147): the lock may have been granted just
  // before the timeout fired, so after a timeout we ask pg_locks whether this session holds the
  // key, and either keep it or make sure it is not left behind on a pooled session.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    if (!st_->share->reserve(key_text_, deadline)) return nullptr;  // a lease of ours kept it until the deadline
    sql::key_reservation reserved(st_->share.get(), key_text_);
    if (auto l = try_shared(reserved, deadline, ec); l || ec) return l;
    if (clock::now() >= deadline) return nullptr;
    st_->share->give_back_idle();  // a pool full of idle shared sessions has room for us
    auto h = st_->connections->checkout_dedicated(deadline, ec);
    if (!h) return nullptr;
    const std::string what = "acquiring advisory lock " + describe(name());
    sql::sql_error err;
    sql::result out;
    std::string timeout = "0";
    if (deadline != clock::time_point::max()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
      if (left.count() < 1) left = std::chrono::milliseconds{1};
      timeout = std::to_string(left.count()) + "ms";
    }
    const sql::param ps[] = {key_, timeout};
    const auto start = clock::now();
    sql::result granted;
    const bool got = h->execute(st_->lock_sql, ps, granted, err);
    const auto own_session = [&](std::uint64_t token) -> std::unique_ptr<spi::lease_state> {
      try {
        auto s = std::make_shared<sql::session>(std::move(h));
        std::lock_guard lk(s->mutex());
        return lease_on(std::move(s), start, token, std::move(reserved), ec);
      } catch (...) {
        h.discard();
        set_error(ec, errc::backend_error, "out of memory");
        return nullptr;
      }
    };
    if (got) {
      if (auto token = token_of(granted)) return own_session(*token);
      h.discard();
      set_error(ec, errc::backend_error, what + ": unreadable fencing token");
      return nullptr;
    }
    if (err.kind == sql::failure::lock_not_available && h->usable()) {
      // Timed out: but was it granted in the same instant?
      const std::int64_t high = static_cast<std::int64_t>(static_cast<std::uint64_t>(key_) >> 32);
      const std::int64_t low = static_cast<std::int64_t>(static_cast<std::uint64_t>(key_) & 0xffffffffu);
      sql::param hl[] = {high, low};
      if (h->execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted"
                     " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                     hl, out, err)) {
        if (out.rows.empty()) return nullptr;  // held by someone else
        // Granted after all. The session holds the lock now, so a token read now is still
        // ordered after every earlier holder's and before every later one's.
        if (h->execute(st_->token_sql, {}, out, err)) {
          if (auto token = token_of(out)) return own_session(*token);
        }
      }
    }
    // Anything else: the session may or may not hold the key; never return it to the pool.
    h.discard();
    sql::set_sql_error(ec, err, what);
    return nullptr;
  }

  std::shared_ptr<state> st_;
  std::int64_t key_;
  std::string key_text_;  // the local reservation's key: the advisory key, not the name (two names may share one)
};

class advisory_backend final : public backend {
 public:
  advisory_backend(std::shared_ptr<state> st, lock_options defaults, std::string redacted_uri)
      : backend(postgres_advisory_caps, lock_scope::network, name_limits{1 << 20}, std::move(defaults), std::move(redacted_uri)),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<advisory_lock>(st_, std::move(name), std::move(options));
  }
  std::shared_ptr<state> st_;
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
  auto st = std::make_shared<state>();
  st->connections = std::move(connections);
  const std::string seq = sequence.qualified_name;
  // The token is read in the very statement that takes the lock, so nextval runs while this
  // session holds it: a later holder, granted only after this session lost the lock, reads a
  // larger value. (A separate statement after the grant would not be ordered: the holder could
  // pause between the two.) The materialized CTE runs first; nextval only for a grant.
  st->try_lock_sql = "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got)"
                     " SELECT CASE WHEN got THEN nextval('" +
                     seq + "') END FROM l";
  // The waiting statement bounds its own wait: lock_timeout ($2) is set in the first CTE, before
  // pg_advisory_lock starts waiting (the server reads it when the wait begins).
  st->lock_sql = "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false)),"
                 " l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM t) SELECT nextval('" + seq + "') FROM l";
  st->token_sql = "SELECT nextval('" + seq + "')";
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
