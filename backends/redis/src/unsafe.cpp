// The well-known broken Redis lock recipes (see unsafe.hpp), each written as the recipe goes, so that
// the failure they are known for happens for real. Small on purpose: no subscriber, no watchdog,
// no held-lease checks; the only thing shared with redis:// is the connection pool.
#include "unsafe.hpp"

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "capabilities.hpp"
#include "connection.hpp"
#include "dlock/spi.hpp"
#include "redis_settings.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct unsafe_settings {
  std::string scheme;
  unsafe_strategy strategy;
  std::shared_ptr<pool> connections;
  std::string prefix;
  // Test hook: a sleep between the two commands of a two-command acquire (SETNX/INCR, then
  // EXPIRE), so a test can kill the holder exactly where the recipe dies.
  milliseconds pause_between{0};
};

std::string ms_text(milliseconds d) { return std::to_string(std::max<milliseconds::rep>(d.count(), 1)); }

// The client's wall clock in unix milliseconds: what the GETSET variant writes and compares, so
// two clients whose clocks disagree disagree about whether the lock expired.
std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<std::int64_t> parse_ms(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return std::nullopt;
  std::int64_t v = 0;
  auto [end, err] = std::from_chars(r->str, r->str + r->len, v);
  if (err != std::errc() || end != r->str + r->len) return std::nullopt;
  return v;
}

// One command; nullptr with ec set on I/O failure or on an error reply.
reply_ptr run(connection& c, const std::vector<std::string_view>& args, const std::string& doing, std::error_code& ec) {
  auto r = c.command(args, ec);
  if (ec) return nullptr;
  if (r->type == REDIS_REPLY_ERROR) {
    set_error(ec, errc::backend_error, "redis: " + doing + ": " + std::string(error_text(r.get())));
    return nullptr;
  }
  return r;
}

bool integer_is(const redisReply* r, long long v) { return r->type == REDIS_REPLY_INTEGER && r->integer == v; }

// Every unsafe grant is released by a plain DEL of the key: whoever holds it now loses it. A DEL
// that finds no key says so (not_owner); a DEL that finds a successor's key deletes it silently.
class unsafe_lease final : public spi::lease_state {
 public:
  unsafe_lease(std::shared_ptr<const unsafe_settings> s, std::string name, std::string key, milliseconds ttl,
               clock::time_point start, std::optional<std::int64_t> own_expiry_ms)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        settings_(std::move(s)),
        key_(std::move(key)),
        own_expiry_ms_(own_expiry_ms) {}

 protected:
  void do_release(std::error_code& ec) noexcept override {
    try {
      // The GETSET recipe's release: delete only if our own clock says the grant has not expired,
      // else leave the key alone. The check and the DEL are two steps, and the clock is ours.
      if (own_expiry_ms_ && wall_ms() >= *own_expiry_ms_) {
        set_error(ec, errc::not_owner,
                  settings_->scheme + ": lock '" + name() +
                      "' had expired by this client's clock at release; the key was left alone");
        return;
      }
      auto c = settings_->connections->checkout(ec);
      if (ec) return;
      auto r = run(*c, {"DEL", key_}, "releasing lock '" + name() + "'", ec);
      if (ec) return;
      if (!integer_is(r.get(), 1))
        set_error(ec, errc::not_owner, settings_->scheme + ": lock '" + name() + "' was already gone at release");
    } catch (...) {
      set_error(ec, errc::backend_unavailable, settings_->scheme + ": out of memory releasing");
    }
  }

 private:
  std::shared_ptr<const unsafe_settings> settings_;
  std::string key_;
  std::optional<std::int64_t> own_expiry_ms_;  // the GETSET variant's value, else nullopt
};

class unsafe_lock final : public distributed_lock {
 public:
  unsafe_lock(std::shared_ptr<const unsafe_settings> s, const std::string& name, capabilities caps,
              lock_options options)
      : distributed_lock(name, caps, std::move(options)), settings_(std::move(s)), key_(settings_->prefix + name) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      auto c = settings_->connections->checkout(ec);
      if (ec) return nullptr;
      const auto start = clock::now();
      switch (settings_->strategy) {
        case unsafe_strategy::setnx_expire: return setnx_then_expire(*c, start, ec);
        case unsafe_strategy::getset: return setnx_or_getset(*c, start, ec);
        case unsafe_strategy::del: return set_nx_px(*c, start, ec);
        case unsafe_strategy::incr: return incr_then_expire(*c, start, ec);
      }
    } catch (...) {
      set_error(ec, errc::backend_unavailable, settings_->scheme + ": out of memory acquiring");
    }
    return nullptr;
  }

 private:
  std::unique_ptr<spi::lease_state> granted(clock::time_point start,
                                            std::optional<std::int64_t> own_expiry_ms = std::nullopt) const {
    return std::make_unique<unsafe_lease>(settings_, std::string(name()), key_, options().ttl, start, own_expiry_ms);
  }

  std::string doing() const { return "acquiring lock '" + std::string(name()) + "'"; }

  // The second command of a two-command acquire. A holder that dies before it leaves a key
  // without a ttl: nobody ever gets the lock again.
  void expire_after_pause(connection& c, std::error_code& ec) const {
    if (settings_->pause_between > milliseconds::zero()) std::this_thread::sleep_for(settings_->pause_between);
    (void)run(c, {"PEXPIRE", key_, ms_text(options().ttl)}, doing(), ec);
  }

  std::unique_ptr<spi::lease_state> setnx_then_expire(connection& c, clock::time_point start, std::error_code& ec) {
    auto r = run(c, {"SETNX", key_, spi::random_token()}, doing(), ec);
    if (ec || !integer_is(r.get(), 1)) return nullptr;
    expire_after_pause(c, ec);
    return ec ? nullptr : granted(start);
  }

  std::unique_ptr<spi::lease_state> incr_then_expire(connection& c, clock::time_point start, std::error_code& ec) {
    auto r = run(c, {"INCR", key_}, doing(), ec);
    if (ec || !integer_is(r.get(), 1)) return nullptr;
    expire_after_pause(c, ec);
    return ec ? nullptr : granted(start);
  }

  std::unique_ptr<spi::lease_state> set_nx_px(connection& c, clock::time_point start, std::error_code& ec) {
    auto r = run(c, {"SET", key_, spi::random_token(), "NX", "PX", ms_text(options().ttl)}, doing(), ec);
    if (ec || r->type != REDIS_REPLY_STATUS) return nullptr;  // nil: held
    return granted(start);
  }

  // The recipe's steps (https://redis.io/docs/latest/commands/setnx/, "Design pattern: Locking with
  // SETNX"): SETNX(expiry) wins a free key; else GET the expiry, and if it is in the
  // past by our clock, GETSET our own expiry and win if the value we replaced is the one we read.
  std::unique_ptr<spi::lease_state> setnx_or_getset(connection& c, clock::time_point start, std::error_code& ec) {
    const auto expiry = wall_ms() + options().ttl.count();
    const auto expiry_text = std::to_string(expiry);
    auto r = run(c, {"SETNX", key_, expiry_text}, doing(), ec);
    if (ec) return nullptr;
    if (integer_is(r.get(), 1)) return granted(start, expiry);
    r = run(c, {"GET", key_}, doing(), ec);
    if (ec) return nullptr;
    const auto seen = parse_ms(r.get());
    if (!seen || *seen >= wall_ms()) return nullptr;  // gone meanwhile, or not expired by our clock
    r = run(c, {"GETSET", key_, expiry_text}, doing(), ec);
    if (ec) return nullptr;
    const auto replaced = parse_ms(r.get());
    if (!replaced || *replaced != *seen) return nullptr;  // another client took it over first
    return granted(start, expiry);
  }

  std::shared_ptr<const unsafe_settings> settings_;
  std::string key_;
};

// The declared set (capabilities.hpp) of the scheme that uses `strategy`.
constexpr capabilities declared_caps(unsafe_strategy strategy) noexcept {
  switch (strategy) {
    case unsafe_strategy::setnx_expire: return redis_unsafe_setnx_expire_caps;
    case unsafe_strategy::getset: return redis_unsafe_getset_caps;
    case unsafe_strategy::del: return redis_unsafe_del_caps;
    case unsafe_strategy::incr: return redis_unsafe_incr_caps;
  }
  return {};
}

class unsafe_backend final : public backend {
 public:
  unsafe_backend(const uri& u, const lock_options& defaults, std::shared_ptr<unsafe_settings> s)
      : backend(declared_caps(s->strategy), lock_scope::network, name_limits{4096}, defaults, u.redacted()) {
    auto cfg = parse_settings(u, mode::simple);
    cfg.where.learn_server_start = false;
    s->prefix = cfg.prefix;
    if (auto v = u.get_duration("unsafe_pause_between")) s->pause_between = *v;
    s->connections = std::make_shared<pool>(cfg.where, cfg.pool_size);
    // Connect now, so a wrong password or an unreachable host fails at open, as redis:// does.
    std::error_code ec;
    { auto probe = s->connections->checkout(ec); }
    if (ec) throw error(ec, last_error_message());
    settings_ = std::move(s);
  }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<unsafe_lock>(settings_, std::move(name), caps(), std::move(options));
  }

 private:
  std::shared_ptr<const unsafe_settings> settings_;
};

}  // namespace

std::shared_ptr<backend> open_unsafe(const uri& u, const lock_options& defaults, unsafe_strategy strategy) {
  auto s = std::make_shared<unsafe_settings>();
  s->scheme = u.scheme();
  s->strategy = strategy;
  return std::make_shared<unsafe_backend>(u, defaults, std::move(s));
}

}  // namespace dlock::redis
