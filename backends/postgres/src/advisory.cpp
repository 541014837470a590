#include "advisory.hpp"

#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "pg_connection.hpp"

namespace dlock::pg {
namespace {

class advisory_lease;

// Polls the sockets of the connections leases hold (no round trip) so a terminated session
// fires the lost notification within ~100ms.
class watcher {
 public:
  ~watcher() {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void add(advisory_lease* l) {
    std::lock_guard lk(m_);
    leases_.push_back(l);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  void remove(advisory_lease* l) noexcept {
    std::lock_guard lk(m_);
    leases_.remove(l);
  }

 private:
  void loop() noexcept;
  std::mutex m_;
  std::condition_variable cv_;
  std::list<advisory_lease*> leases_;
  bool stopping_ = false;
  std::thread thread_;
};

struct state {
  std::shared_ptr<sql::pool> connections;
  capabilities caps;
  std::shared_ptr<watcher> watch = std::make_shared<watcher>();
};

std::string describe(std::string_view name) {
  std::string out = "'";
  for (unsigned char c : name) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out + "'";
}

class advisory_lease final : public spi::lease_state {
 public:
  advisory_lease(std::shared_ptr<state> st, std::string name, std::int64_t key, sql::pool::handle h)
      : lease_state(std::move(name), std::chrono::milliseconds::zero(), clock::time_point::max()),
        st_(std::move(st)), key_(key), conn_(std::move(h)) {
    st_->watch->add(this);
  }
  ~advisory_lease() override {
    st_->watch->remove(this);
    std::lock_guard lk(m_);
    if (conn_) unlock_and_return(nullptr);
  }
  std::int64_t session_id() const noexcept { return session_; }

  void check_session() noexcept {
    {
      std::unique_lock lk(m_, std::try_to_lock);
      if (!lk.owns_lock() || !conn_ || conn_->poll_alive()) return;
      conn_.discard();
    }
    mark_lost(make_error_code(errc::lock_lost));
  }

 private:
  // pg_advisory_unlock; a session we cannot clean is closed, never returned with a lock on it.
  bool unlock_and_return(std::error_code* ec) noexcept {
    sql::param p{key_};
    sql::result out;
    sql::sql_error err;
    bool ok = conn_->execute("SELECT pg_advisory_unlock($1)", std::span(&p, 1), out, err);
    bool was_held = ok && !out.rows.empty() && !out.rows[0].empty() && out.rows[0][0] == "t";
    if (!ok || !was_held) conn_.discard();
    conn_ = {};
    if (ec && !ok) sql::set_sql_error(*ec, err, "releasing advisory lock " + describe(name()));
    if (ec && ok && !was_held)
      set_error(*ec, errc::not_owner, "releasing advisory lock " + describe(name()) + ": the session no longer held it");
    return ok && was_held;
  }
  void do_release(std::error_code& ec) noexcept override {
    std::lock_guard lk(m_);
    if (!conn_) {
      set_error(ec, errc::not_owner, "releasing advisory lock " + describe(name()) +
                                         ": its session ended, and PostgreSQL released the lock then");
      return;
    }
    unlock_and_return(&ec);
    if (ec == errc::backend_unavailable) ec = make_error_code(errc::not_owner);
  }

  std::shared_ptr<state> st_;
  std::int64_t key_;
  std::mutex m_;
  sql::pool::handle conn_;
  std::int64_t session_ = conn_ ? conn_->session_id() : 0;
};

void watcher::loop() noexcept {
  std::unique_lock lk(m_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::milliseconds{100});
    if (stopping_) break;
    for (auto* l : leases_) l->check_session();
  }
}

class advisory_lock final : public distributed_lock {
 public:
  advisory_lock(std::shared_ptr<state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->caps, std::move(o)), st_(std::move(st)),
        key_(spi::sha256_int64(this->name())) {}

 private:
  std::unique_ptr<spi::lease_state> lease_on(sql::pool::handle h, std::error_code& ec) noexcept {
    try {
      return std::make_unique<advisory_lease>(st_, std::string(name()), key_, std::move(h));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    auto h = st_->connections->checkout_dedicated(ec);
    if (!h) return nullptr;
    sql::param p{key_};
    sql::result out;
    sql::sql_error err;
    if (!h->execute("SELECT pg_try_advisory_lock($1)", std::span(&p, 1), out, err)) {
      if (!h->usable()) h.discard();
      sql::set_sql_error(ec, err, "acquiring advisory lock " + describe(name()));
      return nullptr;
    }
    if (out.rows.empty() || out.rows[0].empty() || out.rows[0][0] != "t") return nullptr;
    return lease_on(std::move(h), ec);
  }

  // The server queues us: pg_advisory_lock bounded by lock_timeout. A 55P03 can race with the
  // grant (DistributedLock #147): the lock may have been granted just before the timeout
  // fired, so after a timeout we ask pg_locks whether this session holds the key, and either
  // keep it or make sure it is not left behind on a pooled session.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    auto h = st_->connections->checkout_dedicated(ec);
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
    sql::param t{timeout};
    if (!h->execute("SELECT set_config('lock_timeout', $1, false)", std::span(&t, 1), out, err)) {
      if (!h->usable()) h.discard();
      sql::set_sql_error(ec, err, what);
      return nullptr;
    }
    sql::param k{key_};
    const bool got = h->execute("SELECT pg_advisory_lock($1)", std::span(&k, 1), out, err);
    sql::sql_error reset_err;
    sql::result ignored;
    const bool reset = h->usable() && h->execute("SET lock_timeout = 0", {}, ignored, reset_err);
    if (got && reset) return lease_on(std::move(h), ec);
    if (!got && err.kind == sql::failure::lock_not_available && reset) {
      // Timed out: but was it granted in the same instant?
      const std::int64_t high = static_cast<std::int64_t>(static_cast<std::uint64_t>(key_) >> 32);
      const std::int64_t low = static_cast<std::int64_t>(static_cast<std::uint64_t>(key_) & 0xffffffffu);
      sql::param ps[] = {high, low};
      if (h->execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted"
                     " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                     ps, out, err)) {
        if (!out.rows.empty()) return lease_on(std::move(h), ec);  // granted after all
        return nullptr;                                           // held by someone else
      }
    }
    // Anything else: the session may or may not hold the key; never return it to the pool.
    h.discard();
    if (got) err = reset_err;
    sql::set_sql_error(ec, err, what);
    return nullptr;
  }

  std::shared_ptr<state> st_;
  std::int64_t key_;
};

class advisory_backend final : public backend {
 public:
  advisory_backend(std::shared_ptr<state> st, lock_options defaults, std::string redacted_uri)
      : backend(st->caps, lock_scope::network, name_limits{1 << 20}, std::move(defaults), std::move(redacted_uri)),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<advisory_lock>(st_, std::move(name), std::move(options));
  }
  std::shared_ptr<state> st_;
};

}  // namespace

std::shared_ptr<backend> make_advisory_backend(std::shared_ptr<sql::pool> connections, capabilities caps,
                                               lock_options defaults, std::string redacted_uri) {
  auto st = std::make_shared<state>();
  st->connections = std::move(connections);
  st->caps = caps;
  // Connect once now so wrong credentials / an unknown database fail at open.
  std::error_code ec;
  auto h = st->connections->checkout(ec);
  if (!h) throw error(ec, last_error_message());
  return std::make_shared<advisory_backend>(std::move(st), std::move(defaults), std::move(redacted_uri));
}

}  // namespace dlock::pg
