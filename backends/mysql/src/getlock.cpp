#include "getlock.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <stop_token>

#include "capabilities.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/params.hpp"
#include "dlock_sql/session_lease.hpp"
#include "dlock_sql/session_share.hpp"
#include "getlock_key.hpp"
#include "getlock_query.hpp"
#include "getlock_semaphore.hpp"
#include "sql_connection.hpp"

namespace dlock::mysql {
namespace {

namespace sql = dlock::sql;

// One round trip each (the connection prepares each text once). The GET_LOCK statement is built
// per backend (getlock_backend: it names the fencing sequence); RELEASE_LOCK is getlock_query.hpp's.
constexpr const char* still_ours_sql = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()";

// The lock belongs to the lease's connection, which the session monitor (sql_common) watches:
// a connection the server closed (KILL, restart) is lost at once, for every lease on it, and a
// lost lease leaves its connection (session_lease.hpp: shut down, or its lock given back, within
// deadline_grace), so a check or release stuck on a partitioned link returns. The connection may
// be shared with other leases (session_share.hpp); the lease holds its key's local reservation
// until it has left the connection, so no other lease of this process can take the same name
// through the same connection (GET_LOCK would grant it again). The lock has no ttl on
// the server; the lease's validity is local: start + ttl - drift, moved forward by each
// successful liveness check (the core's renew), so the watchdog fires lost on its own when the
// checks cannot get through.
class getlock_lease final : public sql::session_lease {
 public:
  // `start`: taken before GET_LOCK was sent. Under s->mutex(), s->holders counting this lease.
  getlock_lease(std::shared_ptr<sql::session_monitor> monitor, std::string name, std::string key,
                std::chrono::milliseconds ttl, clock::time_point start, std::uint64_t token,
                std::shared_ptr<sql::session> s, sql::key_reservation reserved,
                std::shared_ptr<sql::session_share> share)
      : session_lease(std::move(monitor), std::move(name), ttl, start, false, s),
        share_(std::move(share)),
        key_(std::move(key)),
        token_(token),
        reserved_(std::move(reserved)) {
    start_watching();
  }
  // Not released (the lease handle always releases; this is the safety net): RELEASE_LOCK as a
  // release would; a connection that cannot run it ends (which frees the lock on the server).
  ~getlock_lease() override {
    stop_watching();
    {
      std::lock_guard lk(connection_mutex());
      if (lost()) {
        leave_after_loss();
      } else if (connection()) {
        std::error_code ignored;
        release_session(ignored);
      }
      end_session(false);
    }
    reserved_.reset();
  }

  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 private:
  void leave(bool keep) noexcept {
    end_session(keep);
    reserved_.reset();  // only now: the connection no longer holds the name
  }
  void release_session(std::error_code& ec) noexcept override {
    const sql::param key{key_};
    std::optional<long long> released;
    const auto start = clock::now();
    if (!query_scalar(*connection(), release_lock_sql, std::span(&key, 1), released, ec,
                      release_label() + " (RELEASE_LOCK)")) {
      // The connection is gone, and with it the lock: it is no longer ours to release.
      leave(false);
      if (ec == errc::backend_unavailable)
        set_error(ec, errc::not_owner,
                  release_label() +
                      ": the lease's connection was lost, and the server frees a "
                      "GET_LOCK lock with its connection: " +
                      last_error_message());
      return;
    }
    shared_session().answered(start);
    if (released != 1) {
      // 0: another connection holds it; NULL: nobody does. Either way not ours any more. The
      // connection itself answered: it stays with its other leases.
      leave(connection()->usable());
      set_error(ec, errc::not_owner,
                release_label() + ": RELEASE_LOCK returned " +
                    (released ? std::to_string(*released) : std::string("NULL")) +
                    ": this connection no longer held it");
      return;
    }
    leave(connection()->usable());
  }
  void left_session() noexcept override {
    reserved_.reset();  // only now: the session no longer holds the key, or is shut down
  }
  std::string release_label() const override { return "releasing lock '" + name() + "'"; }
  std::string_view freed_with_session() const noexcept override {
    return "its connection ended, and the server released the lock then";
  }

  // The lock has no ttl; "renewing" is the liveness check the watchdog runs at ttl/3: the
  // connection still answers and the server still names it as the holder. A KILLed or dropped
  // connection makes this fail, and the core fires lost.
  void do_renew(std::chrono::milliseconds, std::error_code& ec) noexcept override {
    std::lock_guard lk(connection_mutex());
    if (!connection()) {
      set_error(ec, errc::lock_lost,
                "lock '" + name() + "': the lease's connection is gone, so the server freed the lock");
      return;
    }
    const sql::param key{key_};
    std::optional<long long> ours;
    const auto start = clock::now();
    if (!query_scalar(*connection(), still_ours_sql, std::span(&key, 1), ours, ec,
                      "checking lock '" + name() + "' (IS_USED_LOCK)")) {
      if (ec == errc::backend_unavailable)
        set_error(ec, errc::lock_lost,
                  "lock '" + name() +
                      "': the lease's connection is gone, so the server freed the lock: " + last_error_message());
      return;
    }
    shared_session().answered(start);
    if (ours != 1)
      set_error(ec, errc::not_owner, "lock '" + name() + "': the server no longer names this connection as holder");
  }

  std::shared_ptr<sql::session_share> share_;  // the key guard reserved_ points into outlives the lease
  std::string key_;
  std::uint64_t token_;
  sql::key_reservation reserved_;
};

class getlock_lock final : public distributed_lock {
 public:
  getlock_lock(const std::string& name, lock_options options, std::shared_ptr<const getlock_backend::shared> shared)
      : distributed_lock(name, with_primitives(mysql_getlock_caps, mysql_getlock_primitives), std::move(options)),
        key_(getlock_key(name)),
        shared_(std::move(shared)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    // Held by another lease of this process: no round trip (and never a second grant through a
    // connection that already holds the name).
    if (!shared_->share->reserve(key_, clock::now())) return nullptr;
    sql::key_reservation reserved(shared_->share.get(), key_);
    return try_shared(reserved, clock::now() + shared_->connections->options().checkout_timeout, ec);
  }

  // Try first: GET_LOCK(name, 0) on a shared connection (one round trip). Only when that fails,
  // wait on a connection of our own: GET_LOCK(name, seconds) waits on the server, which queues
  // the waiters, and a connection blocked in it could not run another lease's RELEASE_LOCK. At
  // most one caller per name and process waits on the server; the others wait for its local
  // reservation. Fractional seconds are honoured by MariaDB. A wait longer than the socket read
  // timeout is cut into pieces.
  // Within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return sql::wait_out_outages(deadline, options().poll, ec,
                                 [this](clock::time_point d, std::error_code& e) { return wait(d, e); });
  }

 private:
  std::unique_ptr<spi::lease_state> wait(clock::time_point deadline, std::error_code& ec) noexcept {
    if (!shared_->share->reserve(key_, deadline)) return nullptr;
    sql::key_reservation reserved(shared_->share.get(), key_);
    if (auto l = try_shared(reserved, deadline, ec); l || ec) return l;
    if (clock::now() >= deadline) return nullptr;
    shared_->share->give_back_idle();  // a pool full of idle shared sessions has room for us
    auto h = shared_->connections->checkout_dedicated(deadline, ec);
    if (!h) return nullptr;
    auto own = std::make_shared<sql::session>(std::move(h));
    const auto piece =
        std::max<std::chrono::milliseconds>(std::chrono::milliseconds{500}, shared_->command_timeout / 2);
    std::unique_lock lk(own->mutex());
    for (;;) {
      const auto now = clock::now();
      const auto left = deadline <= now ? std::chrono::milliseconds::zero()
                                        : std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
      auto state = attempt(own, std::min(left, piece), reserved, ec);
      if (state || ec || left <= piece) return state;
    }
  }

 private:
  std::unique_ptr<spi::lease_state> try_shared(sql::key_reservation& reserved, clock::time_point deadline,
                                               std::error_code& ec) noexcept {
    auto picked = shared_->share->pick(deadline, ec);
    if (!picked.s) return nullptr;
    return attempt(picked.s, std::chrono::milliseconds::zero(), reserved, ec);
  }

  // Under s->mutex(). One statement: GET_LOCK and, only when it granted, the fencing token (0: not
  // granted, NULL: GET_LOCK failed).
  std::unique_ptr<spi::lease_state> attempt(const std::shared_ptr<sql::session>& s, std::chrono::milliseconds wait,
                                            sql::key_reservation& reserved, std::error_code& ec) noexcept {
    auto start = clock::now();
    const std::string what = "acquiring lock '" + std::string(name()) + "'";
    std::optional<long long> got;
    try {
      char seconds[32];  // the wait in seconds, as decimal text (the connection binds no doubles)
      std::snprintf(seconds, sizeof seconds, "%.3f", std::chrono::duration<double>(wait).count());
      const sql::param params[] = {key_, key_, std::string(seconds)};
      // A wait on the server: a stop request cuts it short (the connection is dropped, and a
      // named lock granted meanwhile goes with its session).
      std::optional<sql::stoppable_statements> waiting;
      if (wait > std::chrono::milliseconds::zero()) waiting.emplace();
      if (!query_scalar(*s->conn(), shared_->get_lock_sql, params, got, ec, what + " (GET_LOCK)") ||
          (got == -1 && !beside_a_semaphore(*s->conn(), got, ec))) {
        // The lock may be held by the connection (NEXTVAL failed after GET_LOCK granted). This
        // process reserved the name, so the connection holds it at most once: one RELEASE_LOCK
        // cleans it; when even that fails the connection ends, with every lease on it.
        const sql::param key{key_};
        std::optional<long long> ignored;
        std::error_code ignored_ec;
        if (!s->conn()->usable() ||
            !query_scalar(*s->conn(), release_lock_sql, std::span(&key, 1), ignored, ignored_ec, what))
          s->end();
        return nullptr;
      }
      s->answered(start);
      if (got && *got > 0) {
        if (sql::sql_error err; !sql::rebase_after_wait(*s->conn(), options().ttl, start, err)) {
          s->end();
          sql::set_sql_error(ec, err, what + " (confirming the session after the wait)");
          return nullptr;
        }
        s->answered(start);
        if (!s->add_holder()) {  // another lease's loss shut the session down: the lock went with it
          set_error(ec, errc::backend_unavailable,
                    what + ": the shared connection was shut down as the lock was granted (another lease on it "
                           "was lost)");
          return nullptr;
        }
        try {
          return std::make_unique<getlock_lease>(shared_->monitor, std::string(name()), key_, options().ttl, start,
                                                 static_cast<std::uint64_t>(*got), s, std::move(reserved),
                                                 shared_->share);
        } catch (...) {
          --s->holders;
          throw;
        }
      }
    } catch (...) {
      s->end();  // it may hold the lock: the connection ends (the server frees it)
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
    if (got == 0) return nullptr;  // held by another connection (timed out waiting), or refused (ec)
    s->end();
    set_error(ec, errc::backend_error, what + ": GET_LOCK returned NULL");
    return nullptr;
  }

  // GET_LOCK granted, and the name is in the semaphores' table: was it ever used as a semaphore,
  // or are permits of it held now? The connection holds the name, so the permits counted now
  // were taken before (a semaphore acquirer taking one later sees the name held and gives its
  // slot back). Permits held: RELEASE_LOCK, `got` 0 and ec name_conflict. None: `got` is the
  // token, read now, while the connection holds the lock. False: a statement failed (ec set;
  // the connection may hold the name).
  bool beside_a_semaphore(sql::connection& c, std::optional<long long>& got, std::error_code& ec) noexcept {
    try {
      const std::string what = "acquiring lock '" + std::string(name()) + "'";
      const sql::param key{key_};
      std::optional<long long> max_count;
      if (!query_scalar(c, shared_->max_count_sql, std::span(&key, 1), max_count, ec, what)) return false;
      const auto held = max_count ? semaphore_permits_held(c, name(), static_cast<std::uint32_t>(*max_count), ec)
                                  : std::optional<std::uint32_t>(0);
      if (!held) return false;
      if (*held == 0) return query_scalar(c, shared_->token_sql, {}, got, ec, what + " (NEXTVAL)");
      std::optional<long long> released;
      if (!query_scalar(c, release_lock_sql, std::span(&key, 1), released, ec, what) || released != 1) return false;
      got = 0;
      set_error(ec, errc::name_conflict,
                "lock '" + std::string(name()) + "' is in use as a semaphore (" + std::to_string(*held) +
                    (*held == 1 ? " permit" : " permits") +
                    " held on the server); a mutex of the same name cannot be taken: use another name");
      return true;
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return false;
    }
  }

  std::string key_;
  std::shared_ptr<const getlock_backend::shared> shared_;
};

}  // namespace

std::vector<std::string> getlock_backend::parameters() {
  auto keys = dlock::sql::pool_parameter_names();
  keys.emplace_back("command_timeout");
  keys.emplace_back("sequence");
  keys.emplace_back("semaphore_table");
  keys.emplace_back("create_sequence");
  return keys;
}

namespace {
std::string identifier_of(const uri& u, const char* key, const char* fallback) {
  const auto v = u.get(key);
  if (!v) return fallback;
  if (!dlock::sql::is_identifier(*v))
    throw error(errc::invalid_uri, std::string(key) + "=" + *v +
                                       ": expected an SQL identifier matching [A-Za-z_][A-Za-z0-9_]{0,62} in " +
                                       u.redacted());
  return *v;
}

// The sequence and the semaphores' table, `name` (`what`: it in messages), created with `ddl`
// (CREATE ... IF NOT EXISTS) unless it exists: an existing one is used as it is (creating needs the
// CREATE privilege, using it does not). Several processes may create it at once: a concurrent
// CREATE ... IF NOT EXISTS can still fail with "already exists" (1050); it then exists. With
// create_sequence=false (!create) it must exist already.
void create_unless_present(dlock::sql::pool& p, const std::string& name, const std::string& what,
                           const std::string& ddl, bool create, const std::string& redacted_uri) {
  std::error_code ec;
  auto h = p.checkout(ec);
  if (!h) throw error(ec, last_error_message());
  const dlock::sql::param table{name};
  dlock::sql::result out;
  dlock::sql::sql_error err;
  if (h->execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
                 std::span(&table, 1), out, err)) {
    if (scalar(out).value_or(0) > 0) return;
    if (!create)
      throw error(errc::backend_error, "opening " + redacted_uri + ": " + what +
                                           " does not exist and create_sequence=false: create it (DDL in the README)");
    if (h->execute(ddl, {}, out, err)) return;
    if (err.code.starts_with("1050")) return;  // "1050/42S01": created by a concurrent opener
  }
  if (!h->usable()) h.discard();
  dlock::sql::set_sql_error(ec, err,
                            "creating " + what + " for " + redacted_uri +
                                " (set create_sequence=false if an administrator creates it; DDL in the README)");
  throw error(ec, last_error_message());
}
}  // namespace

getlock_backend::getlock_backend(const uri& u, const lock_options& defaults)
    : backend(mysql_getlock_caps, mysql_getlock_primitives, lock_scope::network, name_limits{}, defaults,
              u.redacted()) {
  const auto settings = connection_settings::from_uri(u);
  auto st = std::make_shared<shared>();
  st->connections = make_pool(settings, dlock::sql::parse_pool_options(u));
  st->monitor = std::make_shared<dlock::sql::session_monitor>();
  // Half the connections leases may hold are shared by holders; the other half stay for callers
  // that wait on a connection of their own.
  st->share = std::make_shared<dlock::sql::session_share>(
      st->connections, std::max<std::size_t>(1, st->connections->options().max_dedicated / 2));
  st->command_timeout = settings.command_timeout;
  const std::string name = identifier_of(u, "sequence", "dlock_getlock_fence");
  const std::string semaphores = identifier_of(u, "semaphore_table", "dlock_getlock_semaphores");
  st->semaphores_table = "`" + semaphores + "`";
  // The token is read in the very statement that takes the lock (GET_LOCK in a derived table,
  // which the server evaluates once and first; NEXTVAL only when it granted), so NEXTVAL runs
  // while this connection holds the lock: a later holder, granted only after this connection lost
  // it, reads a larger value. NEXTVAL is not transactional: nothing rolls it back. Sequence values
  // start at 1, so 0 means "not granted".
  // One name, one lock: a semaphore of the name (N GET_LOCK slots, getlock_semaphore.hpp) records
  // the name in the semaphores' table before it takes a slot, and checks IS_USED_LOCK(name) after.
  // Granted, the mutex looks the name up in that table in the same statement, after GET_LOCK (its
  // subquery depends on the derived table's result, so it cannot run before): -1 when it is there,
  // and then its slots are counted (beside_a_semaphore). A subquery that did not depend on it would
  // be evaluated before GET_LOCK (measured on MariaDB 10.11: it missed a row inserted while
  // GET_LOCK waited).
  st->get_lock_sql = "SELECT CASE g WHEN 1 THEN IF(EXISTS (SELECT 1 FROM " + st->semaphores_table +
                     " s WHERE s.name = ? AND g = 1), -1, NEXTVAL(`" + name +
                     "`)) WHEN 0 THEN 0 END"
                     " FROM (SELECT GET_LOCK(?, ?) AS g) AS t";
  st->token_sql = "SELECT NEXTVAL(`" + name + "`)";
  st->slot_sql = "SELECT CASE g WHEN 1 THEN IF(IS_USED_LOCK(?) IS NULL, NEXTVAL(`" + name +
                 "`), -1) WHEN 0 THEN 0 END FROM (SELECT GET_LOCK(?, ?) AS g) AS t";
  // Every user of a name should give the same max_count; the largest one recorded is the one the
  // mutex counts the slots of.
  st->register_sql =
      "INSERT INTO " + st->semaphores_table +
      " (name, max_count) VALUES (?, ?) ON DUPLICATE KEY UPDATE max_count = GREATEST(max_count, VALUES(max_count))";
  st->max_count_sql = "SELECT max_count FROM " + st->semaphores_table + " WHERE name = ?";
  const bool create = u.get_bool("create_sequence").value_or(true);
  if (create) {  // connects once: bad credentials fail at open
    create_unless_present(*st->connections, name, "the fencing sequence `" + name + "`",
                          "CREATE SEQUENCE IF NOT EXISTS `" + name + "` ENGINE=InnoDB", true, u.redacted());
  } else {  // fail at open on wrong credentials, an unknown database or an unreachable server
    std::error_code ec;
    auto h = st->connections->checkout(ec);
    if (!h) throw error(ec, last_error_message());
  }
  // The mutex's statement reads the semaphores' table: it must exist with create_sequence=false too.
  create_unless_present(*st->connections, semaphores, "the semaphores' table " + st->semaphores_table,
                        "CREATE TABLE IF NOT EXISTS " + st->semaphores_table +
                            " (name VARBINARY(64) NOT NULL PRIMARY KEY, max_count BIGINT NOT NULL) ENGINE=InnoDB",
                        create, u.redacted());
  shared_ = std::move(st);
}

std::unique_ptr<distributed_lock> getlock_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<getlock_lock>(std::move(name), std::move(options), shared_);
}

std::unique_ptr<semaphore> getlock_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                              lock_options options) {
  return make_getlock_semaphore(name, max_count, semaphore_caps(), std::move(options), shared_);
}

std::optional<std::string> getlock_backend::holding_connection(const std::string& name) {
  std::error_code ec;
  auto c = shared_->connections->checkout(ec);
  if (!c) throw error(ec, last_error_message());
  const sql::param key{getlock_key(name)};
  sql::result out;
  sql::sql_error err;
  if (!c->execute("SELECT IS_USED_LOCK(?)", std::span(&key, 1), out, err)) {
    sql::set_sql_error(ec, err, "inspecting '" + name + "' (IS_USED_LOCK)");
    throw error(ec, last_error_message());
  }
  if (out.rows.empty() || out.rows[0].empty()) return std::nullopt;
  return out.rows[0][0];
}

lock_info getlock_backend::do_inspect(const std::string& name) {
  lock_info info;
  if (const auto id = holding_connection(name)) {
    lock_holder h;
    h.owner = "connection " + *id;
    info.holders.push_back(std::move(h));
  }
  return info;
}

std::vector<lock_holder> getlock_backend::do_force_release(const std::string& name) {
  const auto id = holding_connection(name);
  if (!id) return {};
  // KILL takes no placeholder; the id is the server's own integer, checked to be one.
  if (id->empty() || !std::all_of(id->begin(), id->end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw error(errc::backend_error, "IS_USED_LOCK answered '" + *id + "', not a connection id");
  std::error_code ec;
  auto c = shared_->connections->checkout(ec);
  if (!c) throw error(ec, last_error_message());
  sql::result out;
  sql::sql_error err;
  if (!c->execute("KILL CONNECTION " + *id, {}, out, err)) {
    sql::set_sql_error(ec, err, "breaking '" + name + "' (KILL CONNECTION " + *id + ")");
    throw error(ec, last_error_message());
  }
  lock_holder h;
  h.owner = "connection " + *id;
  return {h};
}

}  // namespace dlock::mysql
