// The unique-index, FOR UPDATE and optimistic-version strategies, written once over
// sql::connection + the dialect's SQL (dialect.hpp fixes what each script returns).
#include "dlock_sql/strategies.hpp"

#include "dlock_sql/session_lease.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <initializer_list>
#include <list>
#include <mutex>
#include <thread>

namespace dlock::sql {
namespace {

using steady = std::chrono::steady_clock;

// The values a script may bind (dialect.hpp: arg).
struct values {
  std::string name;
  std::string owner;
  std::int64_t ttl_ms = 0;
  std::int64_t version = 0;
  std::string channel;
};

std::vector<param> bind(const statement& st, const values& v) {
  std::vector<param> ps;
  ps.reserve(st.binds.size());
  for (arg a : st.binds) {
    switch (a) {
      case arg::name: ps.emplace_back(bytes{v.name}); break;
      case arg::owner: ps.emplace_back(v.owner); break;
      case arg::ttl_ms: ps.emplace_back(v.ttl_ms); break;
      case arg::version: ps.emplace_back(v.version); break;
      case arg::channel: ps.emplace_back(v.channel); break;
    }
  }
  return ps;
}

bool transient(failure f) { return f == failure::deadlock || f == failure::serialization; }

// Runs a script: one statement as it is, several in one transaction (or, where the dialect says
// its statements are safe one by one, as autocommitted statements: two round trips fewer).
// Deadlocks and serialization failures are retried (once by default; `attempts` in all): "try
// again", not "broken" -- but never after a statement that already committed on its own.
bool run(connection& c, const script& s, const values& v, result& out, sql_error& err, int attempts = 2,
         bool one_transaction = true) noexcept {
  for (int attempt = 0;; ++attempt) {
    err = {};
    out = {};
    bool ok = true;
    std::size_t committed = 0;  // statements that committed on their own (autocommit)
    try {
      if (s.size() == 1) {
        auto ps = bind(s.front(), v);
        ok = c.execute(s.front().sql, ps, out, err);
      } else if (!one_transaction) {
        for (std::size_t i = 0; ok && i < s.size(); ++i) {
          auto ps = bind(s[i], v);
          out = {};
          ok = c.execute(s[i].sql, ps, out, err);
          if (ok) ++committed;
        }
      } else {
        ok = c.begin(err);
        for (std::size_t i = 0; ok && i < s.size(); ++i) {
          auto ps = bind(s[i], v);
          out = {};
          ok = c.execute(s[i].sql, ps, out, err);
        }
        if (ok) {
          ok = c.commit(err);
        } else if (c.usable()) {
          sql_error ignored;
          c.rollback(ignored);
        }
      }
    } catch (...) {
      err = {failure::other, "", "out of memory binding parameters"};
      ok = false;
    }
    if (ok) return true;
    if (committed > 0) return false;  // running the script again would apply its first statements twice
    // The transaction was rolled back, so running it again is safe. Fair-mode attempts on MariaDB
    // (INSERT ... SELECT takes shared next-key locks) make deadlocks with releases common under
    // contention: the index strategy allows a few retries, each after a short growing pause.
    if (!transient(err.kind) || attempt + 1 >= attempts) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1 + attempt * 2});
  }
}

std::optional<std::int64_t> to_int(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  std::int64_t v = 0;
  auto [p, e] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (e != std::errc() || p != s->data() + s->size()) return std::nullopt;
  return v;
}

std::string quoted_name(const std::string& name) {
  std::string out = "'";
  for (unsigned char ch : name) {
    if (ch >= 0x20 && ch < 0x7f) out += static_cast<char>(ch);
    else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out + "'";
}

// What every lock and lease of one backend shares; leases keep it alive past the backend.
struct shared_state {
  backend_setup setup;
  std::string channel;
};

void create_schema(shared_state& st, const std::vector<std::string>& ddl) {
  if (!st.setup.params.create_table) return;
  run_ddl(*st.setup.connections, ddl, st.setup.redacted_uri, "creating the lock table",
          "set create_table=false if an administrator creates it; DDL in the README");
}

// A statement on a pooled connection, dropping the connection if it was lost.
bool run_pooled(shared_state& st, const script& s, const values& v, result& out, std::error_code& ec,
                std::string_view what, int attempts = 2) noexcept {
  auto h = st.setup.connections->checkout(ec);
  if (!h) return false;
  sql_error err;
  if (run(*h, s, v, out, err, attempts)) return true;
  if (!h->usable()) h.discard();
  set_sql_error(ec, err, what);
  return false;
}

// Waiting through the dialect's notifier (LISTEN/NOTIFY): arm, try, sleep until a release is
// notified, the holder's ttl could have run out, or the deadline; a last attempt at the deadline.
template <class Try>
std::unique_ptr<spi::lease_state> wait_notified(release_notifier& n, const std::string& name,
                                                steady::time_point deadline, std::chrono::milliseconds recheck,
                                                std::error_code& ec, Try try_once) noexcept {
  for (;;) {
    const auto armed = n.arm(name);
    auto l = try_once(ec);
    const auto now = steady::now();
    if (l || ec || now >= deadline) {
      n.disarm(name);
      return l;
    }
    // A holder that dies releases nothing: its row expires silently, so re-check at `recheck`.
    auto until = deadline;
    if (deadline - now > recheck) until = now + recheck;
    n.wait_for_release(name, armed, until);
  }
}

// The sweeper (backend::sweep_expired): each script on a pooled connection, rows summed.
std::size_t sweep_with(shared_state& st, std::initializer_list<const script*> scripts, std::error_code& ec) noexcept {
  std::size_t swept = 0;
  for (const script* s : scripts) {
    if (s->empty()) continue;
    result out;
    if (!run_pooled(st, *s, values{}, out, ec, "sweeping expired rows of " + st.setup.redacted_uri)) return swept;
    swept += static_cast<std::size_t>(out.rows_affected);
  }
  return swept;
}

// "schema"."table" (display only: the dialect quotes for SQL), plus suffixed tables.
std::string table_label(const table_ref& t, std::string_view suffix = {}) {
  std::string label = t.schema.empty() ? std::string() : "\"" + t.schema + "\".";
  return label + "\"" + t.table + std::string(suffix) + "\"";
}

// ---------------------------------------------------------------- unique index
// The index strategy's statements are whole transactions of their own: safe to re-run.
constexpr int index_attempts = 5;
struct index_state : shared_state {
  index_sql sql;
};

class index_lease final : public spi::lease_state {
 public:
  index_lease(std::shared_ptr<index_state> st, std::string name, std::string owner, std::chrono::milliseconds ttl,
              steady::time_point start, std::uint64_t fence)
      : lease_state(name, ttl, validity_after(start, ttl)), st_(std::move(st)), owner_(std::move(owner)), fence_(fence) {}
  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }

 private:
  void do_release(std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.channel = st_->channel;
    const std::string what = "releasing lock " + quoted_name(name());
    if (!run_pooled(*st_, st_->sql.release, v, out, ec, what, index_attempts)) return;
    // A dialect whose release deletes only the last hold (one round trip in the common case)
    // decrements a re-entered row with a second statement. Two rounds: a concurrent release of
    // another hold of the same owner may bring the count from 2 to 1 between the two statements.
    for (int round = 0; out.rows_affected == 0 && !st_->sql.release_reentered.empty() && round < 2; ++round) {
      if (!run_pooled(*st_, st_->sql.release_reentered, v, out, ec, what, index_attempts)) return;
      if (out.rows_affected != 0 || round == 1) break;
      if (!run_pooled(*st_, st_->sql.release, v, out, ec, what, index_attempts)) return;
    }
    if (out.rows_affected == 0)
      set_error(ec, errc::not_owner, what + ": the row was no longer ours (expired, maybe taken over)");
  }
  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.ttl_ms = ttl.count();
    if (!run_pooled(*st_, st_->sql.renew, v, out, ec, "renewing lock " + quoted_name(name()), index_attempts)) return;
    if (out.rows_affected == 0) {
      set_error(ec, errc::not_owner, "renewing lock " + quoted_name(name()) + ": the row is no longer ours");
    }
  }

  std::shared_ptr<index_state> st_;
  std::string owner_;
  std::uint64_t fence_;
};

class index_lock final : public distributed_lock {
 public:
  index_lock(std::shared_ptr<index_state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->setup.caps, std::move(o)), st_(std::move(st)) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    const auto start = steady::now();
    result out;
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    auto h = st_->setup.connections->checkout(ec);
    if (!h) return nullptr;
    sql_error err;
    const bool fair = st_->setup.params.fair;
    if (!run(*h, fair ? st_->sql.acquire_fair : st_->sql.acquire, v, out, err, index_attempts,
             fair || st_->sql.acquire_in_one_transaction)) {
      if (err.kind == failure::duplicate_key) return nullptr;  // held: a race on the insert
      // A deadlock/serialization failure that persisted through run()'s retry: contention (other
      // attempts on the same rows), not a broken server; a miss, the caller waits and tries again.
      if (transient(err.kind)) return nullptr;
      if (!h->usable()) h.discard();
      set_sql_error(ec, err, "acquiring lock " + quoted_name(v.name));
      return nullptr;
    }
    if (out.rows.empty()) return nullptr;
    auto fence = out.rows.front().empty() ? std::nullopt : to_int(out.rows.front()[0]);
    if (!fence) {
      set_error(ec, errc::backend_error, "acquiring lock " + quoted_name(v.name) + ": the server returned no fence");
      return nullptr;
    }
    try {
      return std::make_unique<index_lease>(st_, v.name, owner(), options().ttl, start,
                                           static_cast<std::uint64_t>(*fence));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    if (st_->setup.params.fair) return fair_acquire_until(deadline, ec);
    return wait_until(deadline, options().poll.max, ec);
  }

  std::unique_ptr<spi::lease_state> wait_until(clock::time_point deadline, std::chrono::milliseconds recheck,
                                               std::error_code& ec) noexcept {
    if (!st_->setup.notifier) return distributed_lock::do_acquire_until(deadline, ec);
    return wait_notified(*st_->setup.notifier, std::string(name()), deadline, recheck, ec,
                         [this](std::error_code& e) { return do_try_acquire(e); });
  }

  // Fair mode: one attempt as a newcomer (granted only when nobody is queued: the uncontended
  // case stays one round trip), then join the waiters table once and retry until our row is the
  // oldest live waiter and the lock is free. Every attempt refreshes our waiter row (server-side
  // expiry = ttl), so attempts come at least every ttl/3; the row leaves on grant (inside the
  // granting statement) or on giving up (dequeue, which wakes the next waiter).
  std::unique_ptr<spi::lease_state> fair_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
    auto l = do_try_acquire(ec);
    if (l || ec || clock::now() >= deadline) return l;
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    v.channel = st_->channel;
    result out;
    {  // joining the queue races with other waiters' attempts (InnoDB gap locks): retry deadlocks
      auto h = st_->setup.connections->checkout(ec);
      if (!h) return nullptr;
      sql_error err;
      bool queued = false;
      for (int tries = 0; tries < 8 && !queued; ++tries) {
        queued = run(*h, st_->sql.enqueue, v, out, err, index_attempts);
        if (!queued && !transient(err.kind)) break;
      }
      if (!queued) {
        if (!h->usable()) h.discard();
        set_sql_error(ec, err, "queueing for lock " + quoted_name(v.name));
        return nullptr;
      }
    }
    auto recheck = std::min<std::chrono::milliseconds>(options().poll.max, options().ttl / 3);
    if (recheck < std::chrono::milliseconds{1}) recheck = std::chrono::milliseconds{1};
    if (st_->setup.notifier) {
      l = wait_until(deadline, recheck, ec);
    } else {  // jittered polling, each sleep capped at `recheck` so our waiter row stays live
      for (unsigned attempt = 0;; ++attempt) {
        l = do_try_acquire(ec);
        const auto now = clock::now();
        if (l || ec || now >= deadline) break;
        auto delay = std::min<clock::duration>(spi::backoff_delay(options().poll, attempt), recheck);
        if (deadline - now < delay) delay = deadline - now;
        std::this_thread::sleep_for(delay);
      }
    }
    if (!l) {  // timed out or failed: leave the queue (best effort; the row expires anyway)
      std::error_code ignored;
      run_pooled(*st_, st_->sql.dequeue, v, out, ignored, "leaving the queue of lock " + quoted_name(v.name),
                 index_attempts);
    }
    return l;
  }

  std::shared_ptr<index_state> st_;
};

class index_backend final : public backend {
 public:
  explicit index_backend(std::shared_ptr<index_state> st)
      : backend(st->setup.caps, lock_scope::network, name_limits{st->setup.max_name_length}, st->setup.defaults,
                st->setup.redacted_uri),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<index_lock>(st_, std::move(name), std::move(options));
  }
  // Expired lock rows (acquire takes them over anyway: this is for tables other tools write),
  // and with fair=true the rows of waiters that died without leaving the queue.
  std::size_t do_sweep_expired(std::error_code& ec) noexcept override {
    if (st_->setup.params.fair) return sweep_with(*st_, {&st_->sql.sweep, &st_->sql.sweep_waiters}, ec);
    return sweep_with(*st_, {&st_->sql.sweep}, ec);
  }
  std::string do_sweep_target() const override {
    const auto& t = st_->setup.params.table;
    if (st_->setup.params.fair && !st_->sql.sweep_waiters.empty())
      return table_label(t) + " and " + table_label(t, "_waiters");
    return table_label(t);
  }
  std::shared_ptr<index_state> st_;
};

// ---------------------------------------------------------------- SELECT ... FOR UPDATE
struct forupdate_state : shared_state {
  forupdate_sql sql;
  // Confirms the sessions that hold the row locks (session_lease.hpp): a session the server
  // closed, or one that stops answering for ttl, is a lost lock.
  std::shared_ptr<session_monitor> monitor;
};

class forupdate_lease final : public session_lease {
 public:
  forupdate_lease(std::shared_ptr<forupdate_state> st, std::string name, std::chrono::milliseconds ttl,
                  clock::time_point start, bool confirm, pool::handle h, std::uint64_t fence)
      : session_lease(st->monitor, std::move(name), ttl, start, confirm, std::move(h)),
        st_(std::move(st)),
        fence_(fence) {}
  ~forupdate_lease() override {
    stop_watching();
    std::lock_guard lk(connection_mutex());
    if (connection()) {  // never released: roll back so the connection goes back clean
      sql_error ignored;
      const bool clean = connection()->usable() && connection()->rollback(ignored);
      end_session(clean && connection()->usable());
    }
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }

 private:
  void do_release(std::error_code& ec) noexcept override {
    std::lock_guard lk(connection_mutex());
    if (!connection()) {
      set_error(ec, errc::not_owner, "releasing lock " + quoted_name(name()) +
                                         ": its connection was lost, and the database released the row lock then");
      return;
    }
    if (lost()) {  // the session could not be confirmed in time (its socket is shut down)
      end_session(false);
      set_error(ec, errc::not_owner, "releasing lock " + quoted_name(name()) +
                                         ": the lease was lost (its session could not be confirmed within the ttl)");
      return;
    }
    sql_error err;
    if (!connection()->commit(err)) {
      set_sql_error(ec, err, "releasing lock " + quoted_name(name()) + " (commit)");
      if (err.kind == failure::connection_lost) ec = make_error_code(errc::not_owner);
      end_session(false);
      return;
    }
    end_session(connection()->usable());  // back to the pool
  }

  std::shared_ptr<forupdate_state> st_;
  std::uint64_t fence_;
};

class forupdate_lock final : public distributed_lock {
 public:
  forupdate_lock(std::shared_ptr<forupdate_state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->setup.caps, std::move(o)), st_(std::move(st)) {}

 private:
  std::unique_ptr<spi::lease_state> attempt(std::optional<clock::time_point> deadline, std::error_code& ec) noexcept {
    values v;
    v.name = std::string(name());
    auto h = st_->setup.connections->checkout_dedicated(ec);
    if (!h) return nullptr;
    const auto start = clock::now();  // the lease's validity counts from before the grant
    const std::string what = "acquiring lock " + quoted_name(v.name);
    sql_error err;
    result out;
    auto fail = [&]() -> std::unique_ptr<spi::lease_state> {
      if (h->usable()) {
        sql_error ignored;
        h->rollback(ignored);
      }
      if (!h->usable()) h.discard();
      if (err.kind == failure::lock_not_available || transient(err.kind)) return nullptr;  // held
      set_sql_error(ec, err, what);
      return nullptr;
    };
    // BEGIN, [the wait bound], lock the row; a name seen for the first time has no row yet:
    // insert it outside the transaction (a concurrent insert is fine) and lock again.
    auto lock_row = [&]() -> bool {
      if (!h->begin(err)) return false;
      if (deadline) {
        std::optional<std::chrono::milliseconds> wait;
        if (*deadline != clock::time_point::max()) {
          auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
          wait = std::max(left, std::chrono::milliseconds{1});
        }
        if (!h->set_lock_wait_timeout(wait, err)) return false;
        return run(*h, st_->sql.lock_wait, v, out, err);
      }
      return run(*h, st_->sql.lock_nowait, v, out, err);
    };
    if (!lock_row()) return fail();
    if (out.rows.empty()) {
      if (!h->rollback(err)) return fail();
      if (!run(*h, st_->sql.ensure_row, v, out, err) && err.kind != failure::duplicate_key) return fail();
      if (!lock_row()) return fail();
      if (out.rows.empty()) {
        err = {failure::other, "", "the lock row vanished after it was inserted (deleted by another tool?)"};
        return fail();
      }
    }
    if (!st_->sql.bump_fence.empty() && !run(*h, st_->sql.bump_fence, v, out, err)) return fail();
    auto fence = out.rows.empty() || out.rows.front().empty() ? std::nullopt : to_int(out.rows.front()[0]);
    if (!fence) {
      err = {failure::other, "", "the fence update returned no row"};
      return fail();
    }
    try {
      return std::make_unique<forupdate_lease>(st_, v.name, options().ttl, start, options().watchdog, std::move(h),
                                               static_cast<std::uint64_t>(*fence));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return attempt(std::nullopt, ec);
  }
  // The server queues us on the row lock, bounded by the session's lock wait timeout.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    for (;;) {
      auto l = attempt(deadline, ec);
      if (l || ec) return l;
      if (clock::now() >= deadline) return attempt(std::nullopt, ec);  // the last attempt at the deadline
    }
  }

  std::shared_ptr<forupdate_state> st_;
};

class forupdate_backend final : public backend {
 public:
  explicit forupdate_backend(std::shared_ptr<forupdate_state> st)
      : backend(st->setup.caps, lock_scope::network, name_limits{st->setup.max_name_length}, st->setup.defaults,
                st->setup.redacted_uri),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<forupdate_lock>(st_, std::move(name), std::move(options));
  }
  std::shared_ptr<forupdate_state> st_;
};

// ---------------------------------------------------------------- optimistic version
struct version_state : shared_state {
  version_sql sql;
};

class version_lease final : public spi::lease_state {
 public:
  version_lease(std::shared_ptr<version_state> st, std::string name, std::string owner, std::chrono::milliseconds ttl,
                steady::time_point start, std::int64_t version)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        st_(std::move(st)),
        owner_(std::move(owner)),
        version_(version) {}
  std::optional<std::uint64_t> fencing_token() const noexcept override { return static_cast<std::uint64_t>(version_); }

 private:
  void do_release(std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.version = version_;
    v.channel = st_->channel;
    if (!run_pooled(*st_, st_->sql.release, v, out, ec, "releasing lock " + quoted_name(name()))) return;
    if (out.rows_affected == 0)
      set_error(ec, errc::not_owner, "releasing lock " + quoted_name(name()) +
                                         ": the version moved on (expired and taken over)");
  }
  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.ttl_ms = ttl.count();
    v.version = version_;
    if (!run_pooled(*st_, st_->sql.renew, v, out, ec, "renewing lock " + quoted_name(name()))) return;
    if (out.rows_affected == 0) {
      set_error(ec, errc::not_owner, "renewing lock " + quoted_name(name()) + ": the version moved on");
    }
  }

  std::shared_ptr<version_state> st_;
  std::string owner_;
  std::int64_t version_;
};

class version_lock final : public distributed_lock {
 public:
  version_lock(std::shared_ptr<version_state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->setup.caps, std::move(o)), st_(std::move(st)) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    const auto start = steady::now();
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    const std::string what = "acquiring lock " + quoted_name(v.name);
    auto h = st_->setup.connections->checkout(ec);
    if (!h) return nullptr;
    sql_error err;
    result out;
    auto fail = [&]() -> std::unique_ptr<spi::lease_state> {
      if (!h->usable()) h.discard();
      if (transient(err.kind)) return nullptr;
      set_sql_error(ec, err, what);
      return nullptr;
    };
    if (!run(*h, st_->sql.read, v, out, err)) return fail();
    if (out.rows.empty()) {  // first use of this name
      if (!run(*h, st_->sql.ensure_row, v, out, err) && err.kind != failure::duplicate_key) return fail();
      if (!run(*h, st_->sql.read, v, out, err)) return fail();
      if (out.rows.empty()) {
        set_error(ec, errc::backend_error, what + ": the row vanished after it was inserted");
        return nullptr;
      }
    }
    const auto& r = out.rows.front();
    auto version = r.size() > 0 ? to_int(r[0]) : std::nullopt;
    auto is_free = r.size() > 1 ? to_int(r[1]) : std::nullopt;
    if (!version || !is_free) {
      set_error(ec, errc::backend_error, what + ": unexpected row from the version read");
      return nullptr;
    }
    if (*is_free == 0) return nullptr;  // held and live
    v.version = *version;
    if (!run(*h, st_->sql.acquire, v, out, err)) return fail();
    if (out.rows_affected == 0) return nullptr;  // someone else moved the version first
    try {
      return std::make_unique<version_lease>(st_, v.name, owner(), options().ttl, start, *version + 1);
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    if (!st_->setup.notifier) return distributed_lock::do_acquire_until(deadline, ec);
    return wait_notified(*st_->setup.notifier, std::string(name()), deadline, options().poll.max, ec,
                         [this](std::error_code& e) { return do_try_acquire(e); });
  }

  std::shared_ptr<version_state> st_;
};

class version_backend final : public backend {
 public:
  explicit version_backend(std::shared_ptr<version_state> st)
      : backend(st->setup.caps, lock_scope::network, name_limits{st->setup.max_name_length}, st->setup.defaults,
                st->setup.redacted_uri),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<version_lock>(st_, std::move(name), std::move(options));
  }
  // Expired grants are freed, their rows kept: the version column is the fencing token.
  std::size_t do_sweep_expired(std::error_code& ec) noexcept override { return sweep_with(*st_, {&st_->sql.sweep}, ec); }
  std::string do_sweep_target() const override {
    if (st_->sql.sweep.empty()) return {};
    return table_label(st_->setup.params.table) + " (grants freed, rows kept: the version is the fencing token)";
  }
  std::shared_ptr<version_state> st_;
};

template <class State>
void init_shared(State& st, backend_setup&& setup) {
  st.setup = std::move(setup);
  if (st.setup.notifier) st.channel = st.setup.notifier->channel();
}

}  // namespace

void run_ddl(pool& connections, const std::vector<std::string>& ddl, const std::string& redacted_uri,
             std::string_view what, std::string_view hint) {
  std::error_code ec;
  auto h = connections.checkout(ec);
  if (!h) throw error(ec, "opening " + redacted_uri + ": " + last_error_message());
  for (const auto& stmt : ddl) {
    for (int attempt = 0;; ++attempt) {
      result out;
      sql_error err;
      if (h->execute(stmt, {}, out, err)) break;
      // Several processes creating the objects at once: PostgreSQL's CREATE ... IF NOT EXISTS
      // can still fail with a unique violation on its catalog; the object then exists.
      if (err.kind == failure::duplicate_key) break;
      if (transient(err.kind) && attempt == 0) continue;
      std::error_code e;
      set_sql_error(e, err, std::string(what) + " for " + redacted_uri + " (" + std::string(hint) + ")");
      throw error(e, last_error_message());
    }
  }
}

std::shared_ptr<backend> make_index_backend(backend_setup setup, index_sql sql) {
  if (setup.params.fair) {
    if (sql.acquire_fair.empty() || sql.enqueue.empty() || sql.dequeue.empty())
      throw error(errc::invalid_uri, setup.redacted_uri + ": fair=true is not available with this dialect");
    setup.caps = setup.caps.with(capability::fair);  // declared only when enabled
  }
  auto st = std::make_shared<index_state>();
  init_shared(*st, std::move(setup));
  st->sql = std::move(sql);
  create_schema(*st, st->sql.create);
  if (st->setup.params.fair) create_schema(*st, st->sql.create_fair);
  return std::make_shared<index_backend>(std::move(st));
}

std::shared_ptr<backend> make_forupdate_backend(backend_setup setup, forupdate_sql sql) {
  if (setup.params.fair)
    throw error(errc::invalid_uri, setup.redacted_uri + ": fair=true applies to the unique-index scheme only (the FOR UPDATE"
                                   " strategy has no waiters table)");
  auto st = std::make_shared<forupdate_state>();
  init_shared(*st, std::move(setup));
  st->sql = std::move(sql);
  st->monitor = std::make_shared<session_monitor>();
  create_schema(*st, st->sql.create);
  return std::make_shared<forupdate_backend>(std::move(st));
}

std::shared_ptr<backend> make_version_backend(backend_setup setup, version_sql sql) {
  if (setup.params.fair)
    throw error(errc::invalid_uri, setup.redacted_uri + ": fair=true applies to the unique-index scheme only (the optimistic-version"
                                   " strategy has no waiters table)");
  auto st = std::make_shared<version_state>();
  init_shared(*st, std::move(setup));
  st->sql = std::move(sql);
  create_schema(*st, st->sql.create);
  return std::make_shared<version_backend>(std::move(st));
}

}  // namespace dlock::sql
