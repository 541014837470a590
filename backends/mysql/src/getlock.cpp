#include "getlock.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>
#include <optional>

#include "getlock_key.hpp"

namespace dlock::mysql {
namespace {

// One round trip each (statements are prepared once per connection).
constexpr const char* get_lock_sql = "SELECT GET_LOCK(?, ?)";
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
  getlock_lease(std::string name, std::string key, std::chrono::milliseconds ttl, std::shared_ptr<pool> p,
                session_ptr s)
      : lease_state(std::move(name), ttl, clock::time_point::max()),
        key_(std::move(key)),
        pool_(std::move(p)),
        session_(std::move(s)) {}

  ~getlock_lease() override {
    // Not released (the lease handle always releases; this is the safety net): closing the
    // connection frees the lock on the server.
    if (session_) pool_->discard(std::move(session_));
  }

  std::uint64_t connection_id() const noexcept { return session_ ? session_->id() : 0; }

 protected:
  void do_release(std::error_code& ec) noexcept override {
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
  std::string key_;
  std::shared_ptr<pool> pool_;
  session_ptr session_;
};

class getlock_lock final : public distributed_lock {
 public:
  getlock_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<pool> p)
      : distributed_lock(name, caps, std::move(options)), key_(getlock_key(name)), pool_(std::move(p)) {}

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
  std::unique_ptr<spi::lease_state> attempt(std::chrono::milliseconds wait, std::error_code& ec) noexcept {
    session_ptr s = pool_->take(ec);
    if (!s) return nullptr;
    std::optional<long long> got;
    const bool ok = guard(ec, "acquiring lock '" + std::string(name()) + "' (GET_LOCK)", [&] {
      auto& st = s->prepared(get_lock_sql);
      st.setString(1, key_);
      st.setDouble(2, std::chrono::duration<double>(wait).count());
      got = scalar(st);
    });
    if (!ok) {
      pool_->discard(std::move(s));
      return nullptr;
    }
    if (got == 1)
      return std::make_unique<getlock_lease>(std::string(name()), key_, options().ttl, pool_, std::move(s));
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
};

}  // namespace

capabilities getlock_backend::declared_caps() noexcept {
  // blocking: GET_LOCK(name, n) waits on the server. expiring: a dead holder's connection ends
  // and frees the lock. renewable: renew is the liveness check that lets the watchdog notice a
  // killed connection, hence lost_notification. Not reentrant (each lease has its own
  // connection, so a second acquire through the same object waits like anyone else), not fair
  // (the server documents no order), no fencing (GET_LOCK has no counter).
  return {capability::blocking, capability::expiring, capability::renewable, capability::lost_notification};
}

getlock_backend::getlock_backend(const uri& u, const lock_options& defaults)
    : backend(declared_caps(), lock_scope::network, name_limits{}, defaults, u.redacted()),
      pool_(std::make_shared<pool>(connection_settings::from_uri(u))) {
  // Fail at open on wrong credentials, an unknown database or an unreachable server.
  std::error_code ec;
  session_ptr s = pool_->take(ec);
  if (!s) throw error(ec, last_error_message());
  pool_->give_back(std::move(s));
}

std::unique_ptr<distributed_lock> getlock_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<getlock_lock>(std::move(name), caps(), std::move(options), pool_);
}

}  // namespace dlock::mysql
