#include "advisory_grant.hpp"

#include <charconv>
#include <optional>
#include <stop_token>

#include "dlock_sql/deadline.hpp"
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

// The locks are the session's: the session monitor (sql_common) confirms the session every ttl/3
// and the lease's validity runs out on its own when it cannot. The session may be shared with
// other leases (session_share.hpp); the lease keeps its keys' local reservations until it has
// left the session (released, or lost: session_lease.hpp), so no other lease of this process
// stacks a grant on them through the same session.
class advisory_lease final : public sql::session_lease {
 public:
  // Under s->mutex(), s->holders already counting this lease.
  advisory_lease(std::shared_ptr<advisory_state> st, std::string name, std::chrono::milliseconds ttl,
                 clock::time_point start, bool confirm, std::uint64_t token, std::shared_ptr<sql::session> s,
                 advisory_hold hold)
      : session_lease(st->monitor, std::move(name), ttl, start, confirm, s),
        st_(std::move(st)),
        token_(token),
        hold_(std::move(hold)) {
    start_watching();
  }
  ~advisory_lease() override {
    stop_watching();
    {
      std::lock_guard lk(connection_mutex());
      if (lost())
        leave_after_loss();
      else if (connection())
        unlock_and_leave(nullptr);
      end_session(false);
    }
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
    forget_keys();  // only now: the session no longer holds the keys
    if (ec && !ok) sql::set_sql_error(*ec, err, release_label());
    if (ec && ok && !was_held) set_error(*ec, errc::not_owner, release_label() + ": the session no longer held it");
    return ok && was_held;
  }
  void release_session(std::error_code& ec) noexcept override {
    unlock_and_leave(&ec);
    if (ec == errc::backend_unavailable) ec = make_error_code(errc::not_owner);
  }
  void left_session() noexcept override {
    forget_keys();  // only now: the session no longer holds the keys, or is shut down
  }
  std::string release_label() const override { return "releasing advisory lock " + describe(name()); }
  std::string_view freed_with_session() const noexcept override {
    return "its session ended, and PostgreSQL released the lock then";
  }

  std::shared_ptr<advisory_state> st_;  // the key guard the reservations point into outlives the lease
  std::uint64_t token_;
  advisory_hold hold_;
};

std::size_t index_of(advisory_kind k) { return static_cast<std::size_t>(k); }
bool is_shared(advisory_kind k) { return k == advisory_kind::reader; }
const char* kind_label(advisory_kind k) { return k == advisory_kind::mutex ? "a mutex" : "a reader-writer lock"; }

// The binds of the granting statements: k, q's halves and, for a writer, w's halves.
std::vector<sql::param> grant_params(const advisory_key& k, advisory_kind kind) {
  std::vector<sql::param> ps{k.key, std::int64_t{high_of(k.semaphore_mark)}, std::int64_t{low_of(k.semaphore_mark)}};
  if (kind == advisory_kind::writer) {
    ps.emplace_back(std::int64_t{high_of(k.writer_mark)});
    ps.emplace_back(std::int64_t{low_of(k.writer_mark)});
  }
  return ps;
}

advisory_hold hold_of(const advisory_state& st, const advisory_key& k, advisory_kind kind,
                      sql::key_reservation reserved) {
  advisory_hold h;
  h.unlock_sql = st.unlock_sql[index_of(kind)];
  h.params.emplace_back(k.key);
  if (kind == advisory_kind::writer) {
    h.params.emplace_back(std::int64_t{high_of(k.writer_mark)});
    h.params.emplace_back(std::int64_t{low_of(k.writer_mark)});
  }
  h.reserved.push_back(std::move(reserved));
  return h;
}

// What a granting statement's answer comes to, on a connection that holds k (and, for a writer,
// w) unless the answer was NULL.
enum class settled { granted, held, refused, failed };

// The answer is NULL (not granted: nothing held), a token, or -1: the probe of q failed, so a
// semaphore of the name may have permits held, or another acquirer of k's kind was probing q at
// that instant. pg_locks tells which: q held shared by any session is a semaphore (give k back,
// name_conflict); otherwise the token is read in the same statement (the session holds k: it is
// ordered like any grant). `failed`: ec set, and the connection may still hold k.
settled settle(sql::connection& c, const advisory_state& st, const advisory_key& k, advisory_kind kind,
               const sql::result& answer, std::uint64_t& token, std::error_code& ec) noexcept {
  const std::string what = "acquiring " +
                           std::string(kind == advisory_kind::mutex ? "advisory lock " : "reader-writer lock ") +
                           describe(k.name);
  if (answer.rows.empty() || answer.rows[0].empty() || !answer.rows[0][0]) return settled::held;
  const auto value = int_of(answer.rows[0][0]);
  if (!value || *value == 0 || *value < -1) {
    set_error(ec, errc::backend_error, what + ": unreadable fencing token");
    return settled::failed;
  }
  if (*value > 0) {
    token = static_cast<std::uint64_t>(*value);
    return settled::granted;
  }
  try {
    const sql::param ps[] = {classid_of(k.semaphore_mark), objid_of(k.semaphore_mark)};
    sql::result out;
    sql::sql_error err;
    if (!c.execute(st.semaphore_check_sql, ps, out, err)) {
      sql::set_sql_error(ec, err, what);
      return settled::failed;
    }
    const auto holders = out.rows.empty() || out.rows[0].empty() ? std::nullopt : int_of(out.rows[0][0]);
    if (holders && *holders == 0 && out.rows[0].size() > 1) {
      if (auto t = int_of(out.rows[0][1]); t && *t > 0) {
        token = static_cast<std::uint64_t>(*t);
        return settled::granted;
      }
    }
    if (!holders || *holders == 0) {
      set_error(ec, errc::backend_error, what + ": unreadable answer to the semaphore check");
      return settled::failed;
    }
    // A semaphore of the name has permits held: give k back before saying so.
    std::vector<sql::param> unlock{k.key};
    if (kind == advisory_kind::writer) {
      unlock.emplace_back(std::int64_t{high_of(k.writer_mark)});
      unlock.emplace_back(std::int64_t{low_of(k.writer_mark)});
    }
    if (!c.execute(st.unlock_sql[index_of(kind)], unlock, out, err)) {
      sql::set_sql_error(ec, err, what);
      return settled::failed;
    }
    set_error(ec, errc::name_conflict,
              "lock " + describe(k.name) + " is in use as a semaphore (permits held by " + std::to_string(*holders) +
                  (*holders == 1 ? " server session" : " server sessions") + "); " + kind_label(kind) +
                  " of the same name cannot be taken: use another name");
    return settled::refused;
  } catch (...) {
    set_error(ec, errc::backend_error, "out of memory");
    return settled::failed;
  }
}

// One attempt on a shared session (only for a key this process's other leases neither hold nor
// acquire, in either kind: no session holds it then, and none holds the name's semaphore mark).
// One statement takes the lock, probes q and, only if granted, reads the token.
std::unique_ptr<spi::lease_state> try_on_shared(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                advisory_kind kind, const lock_options& options,
                                                sql::key_reservation& reserved, clock::time_point deadline,
                                                std::error_code& ec) noexcept {
  auto picked = st->share->pick(deadline, ec);
  if (!picked.s) return nullptr;
  auto& s = *picked.s;
  const auto start = clock::now();
  const auto ps = grant_params(k, kind);
  sql::result out;
  sql::sql_error err;
  const auto give_back = [&] {
    // The lock may have been taken before the statement failed (a failed statement keeps a
    // session lock). This process reserved the key alone, so the session holds it at most once:
    // one unlock cleans it; when even that fails the session ends, with every lease on it.
    auto unlock = hold_of(*st, k, kind, {});
    sql::sql_error ignored;
    sql::result none;
    if (!s.conn()->usable() || !s.conn()->execute(unlock.unlock_sql, unlock.params, none, ignored)) s.end();
  };
  if (!s.conn()->execute(st->try_lock_sql[index_of(kind)], ps, out, err)) {
    sql::set_sql_error(ec, err, "acquiring advisory lock " + describe(k.name));
    give_back();
    return nullptr;
  }
  s.answered(start);
  std::uint64_t token = 0;
  switch (settle(*s.conn(), *st, k, kind, out, token, ec)) {
    case settled::held:
    case settled::refused: return nullptr;
    case settled::failed: give_back(); return nullptr;
    case settled::granted: break;
  }
  try {
    // A copy: picked.s keeps the session (and its locked mutex) alive past a failed lease.
    return advisory_lease_on(st, picked.s, k.name, options, start, token, hold_of(*st, k, kind, std::move(reserved)),
                             ec);
  } catch (...) {
    s.end();
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<spi::lease_state> advisory_lease_on(const std::shared_ptr<advisory_state>& st,
                                                    std::shared_ptr<sql::session> s, std::string name,
                                                    const lock_options& options, clock::time_point start,
                                                    std::uint64_t token, advisory_hold hold,
                                                    std::error_code& ec) noexcept {
  if (!s->add_holder()) {  // another lease's loss shut the session down: the locks went with it
    set_error(ec, errc::backend_unavailable,
              "acquiring advisory lock " + describe(name) +
                  ": the shared session was shut down as the lock was granted (another lease on it was lost)");
    return nullptr;
  }
  try {
    return std::make_unique<advisory_lease>(st, std::move(name), options.ttl, start, options.watchdog, token, s,
                                            std::move(hold));
  } catch (...) {
    s->end();  // it holds the locks: the session ends (the server frees them)
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
}

// Try first, on a shared session, when no other lease of this process holds or acquires the key
// (or the name's semaphore mark); otherwise, and to wait, on a session of our own, where the
// server decides and queues: a session never asks for a key it already holds (PostgreSQL would
// grant it from the session's own locks, past every conflict and past a queued writer), a probe
// never runs on a session holding the other kind's lock of the name (it would not see it), and a
// session blocked in pg_advisory_lock could not run another lease's unlock, so waiting never
// happens on a shared one.
// The bound (lock_timeout) is set in the waiting statement itself: no round trip to set it and
// none to reset it (a session-level setting that stays on this session, and is rolled back with
// a statement that times out; the statements run on sessions later never wait on a lock).
// A 55P03 can race with the grant (DistributedLock #147): the lock may have been granted just
// before the timeout fired, so after a timeout we ask pg_locks whether this session holds the
// key, and either keep it or make sure it is not left behind on a pooled session.
std::unique_ptr<spi::lease_state> acquire_advisory_key(const std::shared_ptr<advisory_state>& st, const advisory_key& k,
                                                       advisory_kind kind, const lock_options& options, bool wait,
                                                       clock::time_point deadline, std::error_code& ec) noexcept {
  const bool shared = is_shared(kind);
  const auto beside = st->share->reserve_beside(k.key_text, shared);
  if (beside == sql::session_share::beside::failed) {
    set_error(ec, errc::backend_error, "out of memory");
    return nullptr;
  }
  sql::key_reservation reserved(st->share.get(), k.key_text, shared);
  if (!wait) deadline = clock::now() + st->connections->options().checkout_timeout;
  if (beside == sql::session_share::beside::alone && !st->share->reserved(k.mark_text)) {
    if (auto l = try_on_shared(st, k, kind, options, reserved, deadline, ec); l || ec) return l;
    if (!wait || clock::now() >= deadline) return nullptr;
    st->share->give_back_idle();  // a pool full of idle shared sessions has room for us
  }
  auto h = st->connections->checkout_dedicated(deadline, ec);
  if (!h) return nullptr;
  const std::string what = "acquiring advisory lock " + describe(k.name);
  const auto m = index_of(kind);
  sql::sql_error err;
  sql::result out;
  auto start = clock::now();
  const auto own_session = [&](std::uint64_t token) -> std::unique_ptr<spi::lease_state> {
    try {
      auto s = std::make_shared<sql::session>(std::move(h));
      std::lock_guard lk(s->mutex());
      // A copy: s keeps the session (and its locked mutex) alive past a failed lease.
      return advisory_lease_on(st, s, k.name, options, start, token, hold_of(*st, k, kind, std::move(reserved)), ec);
    } catch (...) {
      h.discard();
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  };
  // After the granting statement answered: a lease, nothing (h holds nothing then, or gave k
  // back), or a failure (h may hold k: never back to the pool).
  const auto finish = [&](const sql::result& answer) -> std::unique_ptr<spi::lease_state> {
    std::uint64_t token = 0;
    switch (settle(*h, *st, k, kind, answer, token, ec)) {
      case settled::granted:
        if (sql::rebase_after_wait(*h, options.ttl, start, err)) return own_session(token);
        sql::set_sql_error(ec, err, what + " (confirming the session after the wait)");
        break;
      case settled::held:
      case settled::refused: return nullptr;
      case settled::failed: break;
    }
    h.discard();
    return nullptr;
  };
  auto ps = grant_params(k, kind);
  if (!wait) {
    if (!h->execute(st->try_lock_sql[m], ps, out, err)) {
      h.discard();  // it may hold the lock: never back to the pool
      sql::set_sql_error(ec, err, what);
      return nullptr;
    }
    return finish(out);
  }
  std::string timeout = "0";
  if (deadline != clock::time_point::max()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() < 1) left = std::chrono::milliseconds{1};
    timeout = std::to_string(left.count()) + "ms";
  }
  ps.emplace_back(timeout);
  sql::result granted;
  bool answered = false;
  {
    const sql::stoppable_statements waiting;  // a stop request cancels the wait on the server
    answered = h->execute(st->lock_sql[m], ps, granted, err);
  }
  if (answered) return finish(granted);
  if (err.kind == sql::failure::lock_not_available && h->usable()) {
    // Timed out: but was it granted in the same instant?
    sql::param hl[] = {classid_of(k.key), objid_of(k.key)};
    if (h->execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted"
                   " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                   hl, out, err)) {
      if (out.rows.empty()) {
        // Held by someone else. A writer took its mark before it waited: give it back.
        if (kind != advisory_kind::writer) return nullptr;
        const sql::param wm[] = {std::int64_t{high_of(k.writer_mark)}, std::int64_t{low_of(k.writer_mark)}};
        if (h->execute("SELECT pg_advisory_unlock_shared($1::int4, $2::int4)", wm, out, err)) return nullptr;
      } else {
        // Granted after all. The session holds the lock now, so a token read now is still
        // ordered after every earlier holder's and before every later one's.
        const sql::param q[] = {std::int64_t{high_of(k.semaphore_mark)}, std::int64_t{low_of(k.semaphore_mark)}};
        if (h->execute(st->probe_token_sql, q, out, err)) return finish(out);
      }
    }
  }
  // Anything else: the session may or may not hold the key; never return it to the pool.
  h.discard();
  sql::set_sql_error(ec, err, what);
  return nullptr;
}

std::int64_t semaphore_slot_key(std::string_view name, std::uint32_t slot) {
  std::string data;
  data.reserve(4 + name.size());
  for (int shift = 24; shift >= 0; shift -= 8) data.push_back(static_cast<char>((slot >> shift) & 0xffu));
  data.append(name);
  return spi::sha256_int64(data);
}

std::int32_t high_of(std::int64_t key) { return static_cast<std::int32_t>(static_cast<std::uint64_t>(key) >> 32); }
std::int32_t low_of(std::int64_t key) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(key)));
}
std::int64_t classid_of(std::int64_t key) { return static_cast<std::int64_t>(static_cast<std::uint64_t>(key) >> 32); }
std::int64_t objid_of(std::int64_t key) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(key) & 0xffffffffu);
}

std::optional<std::int64_t> int_of(const std::optional<std::string>& cell) {
  if (!cell) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, e] = std::from_chars(cell->data(), cell->data() + cell->size(), v);
  if (e != std::errc() || end != cell->data() + cell->size()) return std::nullopt;
  return v;
}

advisory_key advisory_key::of(std::string name) {
  advisory_key k;
  k.key = spi::sha256_int64(name);
  k.key_text = std::to_string(k.key);
  k.semaphore_mark = semaphore_slot_key(name, semaphore_mark_slot);
  k.mark_text = "semaphore:" + std::to_string(k.semaphore_mark);
  k.writer_mark = semaphore_slot_key(name, writer_mark_slot);
  k.name = std::move(name);
  return k;
}

}  // namespace dlock::pg
