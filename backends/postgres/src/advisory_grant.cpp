#include "advisory_grant.hpp"

#include <sys/socket.h>

#include <optional>
#include <stop_token>

#include "dlock_sql/params.hpp"

namespace dlock::pg {

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

namespace {

using clock = std::chrono::steady_clock;

// Registered on a lease's lost token: the session's socket is shut down first, so no key can be
// taken again through the dead session, then this process's other callers may ask for the keys
// (on a live session). free_key_when_lost (sql_common) for several keys.
struct free_keys_when_lost {
  int fd;
  std::vector<sql::key_reservation>* reserved;
  void operator()() const noexcept {
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    for (auto& r : *reserved) r.reset();
  }
};

// The locks are the session's: the session monitor (sql_common) confirms the session every ttl/3
// and the lease's validity runs out on its own when it cannot. The session may be shared with
// other leases (session_share.hpp); the lease keeps its keys' local reservations until released
// or lost, so no other lease of this process stacks a grant on them through the same session.
class advisory_lease final : public sql::session_lease {
 public:
  // Under s->mutex(), s->holders already counting this lease.
  advisory_lease(std::shared_ptr<advisory_state> st, std::string name, std::chrono::milliseconds ttl, clock::time_point start,
                 bool confirm, std::uint64_t token, std::shared_ptr<sql::session> s, advisory_hold hold)
      : session_lease(st->monitor, std::move(name), ttl, start, confirm, s),
        st_(std::move(st)),
        token_(token),
        hold_(std::move(hold)),
        free_when_lost_(std::in_place, lost_token(), free_keys_when_lost{s->conn() ? s->conn()->native_socket() : -1, &hold_.reserved}) {}
  ~advisory_lease() override {
    stop_watching();
    {
      std::lock_guard lk(connection_mutex());
      if (connection()) unlock_and_leave(nullptr);
      else end_session(false);
    }
    free_when_lost_.reset();
    forget_keys();
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 private:
  void forget_keys() noexcept {
    for (auto& r : hold_.reserved) r.reset();
  }
  // The unlock on the lease's session. A session the statement failed on is ended (it may still
  // hold the locks, and with it every lease on it is lost), never returned to the pool.
  bool unlock_and_leave(std::error_code* ec) noexcept {
    sql::result out;
    sql::sql_error err;
    const auto start = clock::now();
    bool ok = connection()->execute(hold_.unlock_sql, hold_.params, out, err);
    bool was_held = ok && !out.rows.empty() && !out.rows[0].empty() && out.rows[0][0] == "t";
    if (ok) shared_session().answered(start);
    end_session(ok);
    free_when_lost_.reset();
    forget_keys();  // only now: the session no longer holds the keys
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
    forget_keys();  // only now: the session no longer holds the keys, or is shut down
  }
  std::string release_label() const override { return "releasing advisory lock " + describe(name()); }
  std::string_view freed_with_session() const noexcept override {
    return "its session ended, and PostgreSQL released the lock then";
  }

  std::shared_ptr<advisory_state> st_;  // the key guard the reservations point into outlives the lease
  std::uint64_t token_;
  advisory_hold hold_;
  std::optional<std::stop_callback<free_keys_when_lost>> free_when_lost_;
};

std::size_t index_of(advisory_mode m) { return m == advisory_mode::shared ? 1 : 0; }

advisory_hold hold_of(const advisory_state& st, const advisory_key& k, advisory_mode mode, sql::key_reservation reserved) {
  advisory_hold h;
  h.unlock_sql = st.unlock_sql[index_of(mode)];
  h.params.emplace_back(k.key);
  h.reserved.push_back(std::move(reserved));
  return h;
}

// One attempt on a shared session (only for a key this process's other leases neither hold nor
// acquire: no session holds it then). One statement takes the lock and, only if granted, reads
// the token (NULL: not granted).
std::unique_ptr<spi::lease_state> try_on_shared(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                advisory_mode mode, const lock_options& options,
                                                sql::key_reservation& reserved, clock::time_point deadline,
                                                std::error_code& ec) noexcept {
  auto picked = st->share->pick(deadline, ec);
  if (!picked.s) return nullptr;
  auto& s = *picked.s;
  const auto start = clock::now();
  sql::param p{k.key};
  sql::result out;
  sql::sql_error err;
  if (!s.conn()->execute(st->try_lock_sql[index_of(mode)], std::span(&p, 1), out, err)) {
    // The lock may have been taken before the token failed (a failed statement keeps a session
    // lock). This process reserved the key alone, so the session holds it at most once: one
    // unlock cleans it; when even that fails the session ends, with every lease on it.
    sql::set_sql_error(ec, err, "acquiring advisory lock " + describe(k.name));
    sql::sql_error ignored;
    sql::result none;
    if (!s.conn()->usable() || !s.conn()->execute(st->unlock_sql[index_of(mode)], std::span(&p, 1), none, ignored))
      s.end();
    return nullptr;
  }
  s.answered(start);
  if (out.rows.empty() || out.rows[0].empty() || !out.rows[0][0]) return nullptr;  // held elsewhere
  const auto token = token_of(out);
  if (!token) {
    s.end();
    set_error(ec, errc::backend_error, "acquiring advisory lock " + describe(k.name) + ": unreadable fencing token");
    return nullptr;
  }
  try {
    return advisory_lease_on(st, std::move(picked.s), k.name, options, start, *token, hold_of(*st, k, mode, std::move(reserved)), ec);
  } catch (...) {
    s.end();
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<spi::lease_state> advisory_lease_on(const std::shared_ptr<advisory_state>& st, std::shared_ptr<sql::session> s,
                                                    std::string name, const lock_options& options, clock::time_point start,
                                                    std::uint64_t token, advisory_hold hold, std::error_code& ec) noexcept {
  try {
    ++s->holders;
    return std::make_unique<advisory_lease>(st, std::move(name), options.ttl, start, options.watchdog, token, s, std::move(hold));
  } catch (...) {
    s->end();  // it holds the locks: the session ends (the server frees them)
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
}

// Try first, on a shared session, when no other lease of this process holds or acquires the key;
// otherwise, and to wait, on a session of our own, where the server decides and queues: a session
// never asks for a key it already holds (PostgreSQL would grant it from the session's own locks,
// past every conflict and past a queued writer), and a session blocked in pg_advisory_lock could
// not run another lease's unlock, so waiting never happens on a shared one.
// The bound (lock_timeout) is set in the waiting statement itself: no round trip to set it and
// none to reset it (a session-level setting that stays on this session, and is rolled back with
// a statement that times out; the statements run on sessions later never wait on a lock).
// A 55P03 can race with the grant (DistributedLock #147): the lock may have been granted just
// before the timeout fired, so after a timeout we ask pg_locks whether this session holds the
// key, and either keep it or make sure it is not left behind on a pooled session.
std::unique_ptr<spi::lease_state> acquire_advisory_key(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                       advisory_mode mode, const lock_options& options, bool wait,
                                                       clock::time_point deadline, std::error_code& ec) noexcept {
  const bool shared = mode == advisory_mode::shared;
  const auto beside = st->share->reserve_beside(k.key_text, shared);
  if (beside == sql::session_share::beside::failed) {
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
  sql::key_reservation reserved(st->share.get(), k.key_text, shared);
  if (!wait) deadline = clock::now() + st->connections->options().checkout_timeout;
  if (beside == sql::session_share::beside::alone) {
    if (auto l = try_on_shared(st, k, mode, options, reserved, deadline, ec); l || ec) return l;
    if (!wait || clock::now() >= deadline) return nullptr;
    st->share->give_back_idle();  // a pool full of idle shared sessions has room for us
  }
  auto h = st->connections->checkout_dedicated(deadline, ec);
  if (!h) return nullptr;
  const std::string what = "acquiring advisory lock " + describe(k.name);
  const auto m = index_of(mode);
  sql::sql_error err;
  sql::result out;
  const auto start = clock::now();
  const auto own_session = [&](std::uint64_t token) -> std::unique_ptr<spi::lease_state> {
    try {
      auto s = std::make_shared<sql::session>(std::move(h));
      std::lock_guard lk(s->mutex());
      return advisory_lease_on(st, std::move(s), k.name, options, start, token, hold_of(*st, k, mode, std::move(reserved)), ec);
    } catch (...) {
      h.discard();
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  };
  if (!wait) {
    sql::param p{k.key};
    if (!h->execute(st->try_lock_sql[m], std::span(&p, 1), out, err)) {
      h.discard();  // it may hold the lock: never back to the pool
      sql::set_sql_error(ec, err, what);
      return nullptr;
    }
    if (out.rows.empty() || out.rows[0].empty() || !out.rows[0][0]) return nullptr;  // held elsewhere; h holds nothing
    if (auto token = token_of(out)) return own_session(*token);
    h.discard();
    set_error(ec, errc::backend_error, what + ": unreadable fencing token");
    return nullptr;
  }
  std::string timeout = "0";
  if (deadline != clock::time_point::max()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() < 1) left = std::chrono::milliseconds{1};
    timeout = std::to_string(left.count()) + "ms";
  }
  const sql::param ps[] = {k.key, timeout};
  sql::result granted;
  if (h->execute(st->lock_sql[m], ps, granted, err)) {
    if (auto token = token_of(granted)) return own_session(*token);
    h.discard();
    set_error(ec, errc::backend_error, what + ": unreadable fencing token");
    return nullptr;
  }
  if (err.kind == sql::failure::lock_not_available && h->usable()) {
    // Timed out: but was it granted in the same instant?
    const std::int64_t high = static_cast<std::int64_t>(static_cast<std::uint64_t>(k.key) >> 32);
    const std::int64_t low = static_cast<std::int64_t>(static_cast<std::uint64_t>(k.key) & 0xffffffffu);
    sql::param hl[] = {high, low};
    if (h->execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted"
                   " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                   hl, out, err)) {
      if (out.rows.empty()) return nullptr;  // held by someone else
      // Granted after all. The session holds the lock now, so a token read now is still
      // ordered after every earlier holder's and before every later one's.
      if (h->execute(st->token_sql, {}, out, err)) {
        if (auto token = token_of(out)) return own_session(*token);
      }
    }
  }
  // Anything else: the session may or may not hold the key; never return it to the pool.
  h.discard();
  sql::set_sql_error(ec, err, what);
  return nullptr;
}

}  // namespace dlock::pg
