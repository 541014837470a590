#include "getlock.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <stop_token>

#include "dlock_sql/params.hpp"
#include "getlock_key.hpp"

namespace dlock::mysql {
namespace {

// One round trip each (statements are prepared once per connection). The GET_LOCK statement is
// built per backend (getlock_backend: it names the fencing sequence).
constexpr const char* release_lock_sql = "SELECT RELEASE_LOCK(?)";
constexpr const char* still_ours_sql = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()";

// The single integer a SELECT of one function returns; nullopt for SQL NULL.
std::optional<long long> scalar(::sql::PreparedStatement& st) {
  std::unique_ptr<::sql::ResultSet> rs(st.executeQuery());
  if (!rs->next() || rs->isNull(1)) return std::nullopt;
  return rs->getInt64(1);
}

class getlock_lease final : public spi::lease_state {
 public:
  // `start`: taken before GET_LOCK was sent. The lock has no ttl on the server; the lease's
  // validity is local: start + ttl - drift, moved forward by each successful liveness check (the
  // core's renew), so the watchdog fires lost on its own when the checks cannot get through.
  getlock_lease(std::string name, std::string key, std::chrono::milliseconds ttl, clock::time_point start,
                std::uint64_t token, std::shared_ptr<pool> p, session_ptr s)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        key_(std::move(key)),
        token_(token),
        pool_(std::move(p)),
        session_(std::move(s)) {
    // Once lost, a check or release stuck on a partitioned link returns at once (shutdown wakes
    // the blocked read) instead of after command_timeout: the watchdog's worker is not held up.
    if (session_->socket_fd() >= 0) cut_when_lost_.emplace(lost_token(), shut_down_socket{session_->socket_fd()});
  }

  ~getlock_lease() override {
    // Not released (the lease handle always releases; this is the safety net): closing the
    // connection frees the lock on the server.
    cut_when_lost_.reset();
    if (session_) pool_->discard(std::move(session_));
  }

  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }
  std::uint64_t connection_id() const noexcept { return session_ ? session_->id() : 0; }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    cut_when_lost_.reset();  // before the connection can be closed and its socket number reused
    if (lost()) {
      pool_->discard(std::move(session_));
      set_error(ec, errc::not_owner,
                "releasing lock '" + name() + "': the lease was lost (its connection could not be confirmed within the ttl)");
      return;
    }
    std::optional<long long> released;
    const bool ok = guard(ec, "releasing lock '" + name() + "' (RELEASE_LOCK)", [&] {
      auto& st = session_->prepared(release_lock_sql);
      st.setString(1, key_);
      released = scalar(st);
    });
    if (!ok) {
      // The connection is gone, and with it the lock: it is no longer ours to release.
      pool_->discard(std::move(session_));
      if (ec == errc::backend_unavailable)
        set_error(ec, errc::not_owner,
                  "releasing lock '" + name() + "': the lease's connection was lost, and the server frees a "
                  "GET_LOCK lock with its connection: " + last_error_message());
      return;
    }
    if (released != 1) {
      // 0: another connection holds it; NULL: nobody does. Either way not ours any more (the
      // connection was killed and this is a new one? No: a KILLed connection fails above).
      pool_->discard(std::move(session_));
      set_error(ec, errc::not_owner,
                "releasing lock '" + name() + "': RELEASE_LOCK returned " +
                    (released ? std::to_string(*released) : std::string("NULL")) +
                    ": this connection no longer held it");
      return;
    }
    pool_->give_back(std::move(session_));
  }

  // The lock has no ttl; "renewing" is the liveness check the watchdog runs at ttl/3: the
  // dedicated connection still answers and the server still names it as the holder. A KILLed or
  // dropped connection makes this fail, and the core fires lost.
  void do_renew(std::chrono::milliseconds, std::error_code& ec) noexcept override {
    std::optional<long long> ours;
    const bool ok = guard(ec, "checking lock '" + name() + "' (IS_USED_LOCK)", [&] {
      auto& st = session_->prepared(still_ours_sql);
      st.setString(1, key_);
      ours = scalar(st);
    });
    if (!ok) {
      if (ec == errc::backend_unavailable)
        set_error(ec, errc::lock_lost,
                  "lock '" + name() + "': the lease's connection is gone, so the server freed the lock: " +
                      last_error_message());
      return;
    }
    if (ours != 1)
      set_error(ec, errc::not_owner, "lock '" + name() + "': the server no longer names this connection as holder");
  }

 private:
  struct shut_down_socket {
    int fd;
    void operator()() const noexcept { ::shutdown(fd, SHUT_RDWR); }
  };
  std::string key_;
  std::uint64_t token_;
  std::shared_ptr<pool> pool_;
  session_ptr session_;
  std::optional<std::stop_callback<shut_down_socket>> cut_when_lost_;
};

class getlock_lock final : public distributed_lock {
 public:
  getlock_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<pool> p,
               std::shared_ptr<const std::string> get_lock_sql)
      : distributed_lock(name, caps, std::move(options)),
        key_(getlock_key(name)),
        pool_(std::move(p)),
        get_lock_sql_(std::move(get_lock_sql)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return attempt(std::chrono::milliseconds::zero(), ec);
  }

  // GET_LOCK(name, seconds) waits on the server, which queues the waiters; fractional seconds are
  // honoured by MariaDB. A wait longer than the socket read timeout is cut into pieces.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    const auto piece = std::max<std::chrono::milliseconds>(std::chrono::milliseconds{500},
                                                           pool_->settings().command_timeout / 2);
    for (;;) {
      const auto now = clock::now();
      const auto left = deadline <= now ? std::chrono::milliseconds::zero()
                                        : std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
      auto state = attempt(std::min(left, piece), ec);
      if (state || ec || left <= piece) return state;
    }
  }

 private:
  // One statement: GET_LOCK and, only when it granted, the fencing token (0: not granted,
  // NULL: GET_LOCK failed).
  std::unique_ptr<spi::lease_state> attempt(std::chrono::milliseconds wait, std::error_code& ec) noexcept {
    session_ptr s = pool_->take(ec);
    if (!s) return nullptr;
    const auto start = clock::now();
    std::optional<long long> got;
    const bool ok = guard(ec, "acquiring lock '" + std::string(name()) + "' (GET_LOCK)", [&] {
      auto& st = s->prepared(*get_lock_sql_);
      st.setString(1, key_);
      st.setDouble(2, std::chrono::duration<double>(wait).count());
      got = scalar(st);
    });
    if (!ok) {
      pool_->discard(std::move(s));  // the lock may be held by it: never back to the pool
      return nullptr;
    }
    if (got && *got > 0) {
      try {
        return std::make_unique<getlock_lease>(std::string(name()), key_, options().ttl, start,
                                               static_cast<std::uint64_t>(*got), pool_, std::move(s));
      } catch (...) {
        pool_->discard(std::move(s));
        set_error(ec, errc::backend_error, "out of memory");
        return nullptr;
      }
    }
    if (got == 0) {  // held by another connection (timed out waiting)
      pool_->give_back(std::move(s));
      return nullptr;
    }
    pool_->discard(std::move(s));
    set_error(ec, errc::backend_error, "acquiring lock '" + std::string(name()) + "': GET_LOCK returned NULL");
    return nullptr;
  }

  std::string key_;
  std::shared_ptr<pool> pool_;
  std::shared_ptr<const std::string> get_lock_sql_;
};

}  // namespace

capabilities getlock_backend::declared_caps() noexcept {
  // blocking: GET_LOCK(name, n) waits on the server. expiring: a dead holder's connection ends
  // and frees the lock. renewable: renew is the liveness check that moves the lease's local
  // validity and lets the watchdog notice a killed connection or a silent link, hence
  // lost_notification. fencing: a sequence read in the granting statement. Not reentrant (each
  // lease has its own connection, so a second acquire through the same object waits like anyone
  // else), not fair (the server documents no order).
  return {capability::blocking, capability::expiring, capability::renewable, capability::fencing,
          capability::lost_notification};
}

std::vector<std::string> getlock_backend::parameters() {
  auto keys = connection_parameters();
  keys.push_back("sequence");
  keys.push_back("create_sequence");
  return keys;
}

namespace {
std::string sequence_of(const uri& u) {
  const auto v = u.get("sequence");
  if (!v) return "dlock_getlock_fence";
  if (!dlock::sql::is_identifier(*v))
    throw error(errc::invalid_uri, "sequence=" + *v + ": expected an SQL identifier matching [A-Za-z_][A-Za-z0-9_]{0,62} in " +
                                       u.redacted());
  return *v;
}

// Several processes may create the sequence at once: a concurrent CREATE ... IF NOT EXISTS can
// still fail with "already exists" (1050); the sequence then exists.
// An existing sequence is left alone (creating needs the CREATE privilege, using it does not).
void create_sequence(pool& p, const std::string& name, const std::string& redacted_uri) {
  const std::string quoted = "`" + name + "`";
  std::error_code ec;
  session_ptr s = p.take(ec);
  if (!s) throw error(ec, last_error_message());
  std::string message;
  errc code = errc::backend_error;
  try {
    auto& exists = s->prepared(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?");
    exists.setString(1, name);
    if (scalar(exists).value_or(0) > 0) {
      p.give_back(std::move(s));
      return;
    }
    s->execute("CREATE SEQUENCE IF NOT EXISTS " + quoted + " ENGINE=InnoDB");
    p.give_back(std::move(s));
    return;
  } catch (const ::sql::SQLException& e) {
    if (e.getErrorCode() == 1050) {
      p.give_back(std::move(s));
      return;
    }
    code = classify(e);
    message = describe(e, "creating the fencing sequence " + quoted + " for " + redacted_uri +
                              " (set create_sequence=false if an administrator creates it; DDL in the README)");
  } catch (const std::exception& e) {
    message = "creating the fencing sequence " + quoted + " for " + redacted_uri + ": " + e.what();
  }
  p.discard(std::move(s));
  throw error(code, message);
}
}  // namespace

getlock_backend::getlock_backend(const uri& u, const lock_options& defaults)
    : backend(declared_caps(), lock_scope::network, name_limits{}, defaults, u.redacted()),
      pool_(std::make_shared<pool>(connection_settings::from_uri(u))) {
  const std::string name = sequence_of(u);
  const std::string sequence = "`" + name + "`";
  // The token is read in the very statement that takes the lock (CASE evaluates GET_LOCK once,
  // NEXTVAL only when it granted), so NEXTVAL runs while this connection holds the lock: a later
  // holder, granted only after this connection lost it, reads a larger value. NEXTVAL is not
  // transactional: nothing rolls it back. Sequence values start at 1, so 0 means "not granted".
  get_lock_sql_ = std::make_shared<const std::string>("SELECT CASE GET_LOCK(?, ?) WHEN 1 THEN NEXTVAL(" + sequence +
                                                      ") WHEN 0 THEN 0 END");
  if (u.get_bool("create_sequence").value_or(true)) {
    create_sequence(*pool_, name, u.redacted());  // connects once: bad credentials fail at open
    return;
  }
  // Fail at open on wrong credentials, an unknown database or an unreachable server.
  std::error_code ec;
  session_ptr s = pool_->take(ec);
  if (!s) throw error(ec, last_error_message());
  pool_->give_back(std::move(s));
}

std::unique_ptr<distributed_lock> getlock_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<getlock_lock>(std::move(name), caps(), std::move(options), pool_, get_lock_sql_);
}

}  // namespace dlock::mysql
