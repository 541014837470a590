#include "redis_backend.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ms_text(milliseconds d) { return std::to_string(std::max<milliseconds::rep>(d.count(), 1)); }

// Redisson passes the client's wall clock as "now" to its fair-lock scripts; so do we.
std::string now_ms() {
  return std::to_string(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// A UUID-shaped client id (Redisson's RedissonClient id is UUID.randomUUID()).
std::string random_uuid() {
  auto t = spi::random_token();  // 32 hex digits
  return t.substr(0, 8) + "-" + t.substr(8, 4) + "-" + t.substr(12, 4) + "-" + t.substr(16, 4) + "-" + t.substr(20, 12);
}

// One grant. Simple mode: the token on the STRING key. Reentrant: one hold of the owner field.
class redis_lease final : public spi::lease_state {
 public:
  redis_lease(std::shared_ptr<shared> s, std::string name, std::string key, std::string secret, milliseconds ttl,
              clock::time_point start, std::uint64_t fencing)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        shared_(std::move(s)),
        key_(std::move(key)),
        secret_(std::move(secret)),
        fencing_(fencing) {}

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fencing_; }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    auto c = shared_->connections->checkout(ec);
    if (ec) return;
    const auto& cfg = shared_->config;
    reply_ptr r;
    try {
      if (cfg.lock_mode == mode::simple) {
        const auto channel = cfg.prefix + redisson_prefix_name("dlock__channel", name());
        r = c->eval(scripts_release_simple(), {key_, channel}, {secret_}, ec);
      } else if (cfg.lock_mode == mode::reentrant) {
        const auto channel = redisson_prefix_name("redisson_lock__channel", key_);
        r = c->eval(scripts_release_reentrant(), {key_, channel}, {"0", ms_text(ttl()), secret_, "publish"}, ec);
      } else {
        r = c->eval(scripts_release_fair(),
                    {key_, redisson_prefix_name("redisson_lock_queue", key_),
                     redisson_prefix_name("redisson_lock_timeout", key_),
                     redisson_prefix_name("redisson_lock__channel", key_)},
                    {"0", ms_text(ttl()), secret_, now_ms(), "publish"}, ec);
      }
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory releasing");
      return;
    }
    if (ec) return;
    const bool ours = cfg.lock_mode == mode::simple ? (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
                                                    : r->type == REDIS_REPLY_INTEGER;
    if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {
      set_error(ec, errc::backend_error, "redis: releasing lock '" + name() + "': " + std::string(error_text(r.get())));
    } else if (!ours) {
      set_error(ec, errc::not_owner, "redis: lock '" + name() +
                                         "' was no longer ours at release (it expired or was deleted, and may "
                                         "belong to someone else now); the work done under it was not protected");
    }
  }

  void do_renew(milliseconds ttl, std::error_code& ec) noexcept override {
    auto c = shared_->connections->checkout(ec);
    if (ec) return;
    reply_ptr r;
    try {
      r = shared_->config.lock_mode == mode::simple ? c->eval(scripts_renew_simple(), {key_}, {secret_, ms_text(ttl)}, ec)
                                                    : c->eval(scripts_renew_reentrant(), {key_}, {ms_text(ttl), secret_}, ec);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory renewing");
      return;
    }
    if (ec) return;
    if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {
      set_error(ec, errc::backend_error, "redis: renewing lock '" + name() + "': " + std::string(error_text(r.get())));
    } else if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
      set_error(ec, errc::lock_lost, "redis: lock '" + name() +
                                         "' is gone from the server at renewal (expired, deleted, or the server "
                                         "restarted without persistence)");
    }
  }

 private:
  static const script& scripts_release_simple() noexcept;
  static const script& scripts_release_reentrant() noexcept;
  static const script& scripts_release_fair() noexcept;
  static const script& scripts_renew_simple() noexcept;
  static const script& scripts_renew_reentrant() noexcept;

  std::shared_ptr<shared> shared_;
  std::string key_, secret_;
  std::uint64_t fencing_;
};

}  // namespace
}  // namespace dlock::redis

#include "scripts.hpp"

namespace dlock::redis {
namespace {

const script& redis_lease::scripts_release_simple() noexcept { return scripts::simple_release; }
const script& redis_lease::scripts_release_reentrant() noexcept { return scripts::reentrant_release; }
const script& redis_lease::scripts_release_fair() noexcept { return scripts::fair_release; }
const script& redis_lease::scripts_renew_simple() noexcept { return scripts::simple_renew; }
const script& redis_lease::scripts_renew_reentrant() noexcept { return scripts::reentrant_renew; }

class redis_lock final : public distributed_lock {
 public:
  redis_lock(std::shared_ptr<shared> s, std::string name, capabilities caps, lock_options options)
      : distributed_lock(name, caps, options), shared_(std::move(s)) {
    const auto& cfg = shared_->config;
    key_ = cfg.prefix + name;
    if (cfg.lock_mode == mode::simple) {
      fence_key_ = cfg.prefix + redisson_prefix_name("dlock_fencing", name);
      channel_ = cfg.prefix + redisson_prefix_name("dlock__channel", name);
    } else {
      queue_key_ = redisson_prefix_name("redisson_lock_queue", key_);
      timeout_key_ = redisson_prefix_name("redisson_lock_timeout", key_);
      fence_key_ = redisson_prefix_name("redisson_lock_token", key_);
      channel_ = redisson_prefix_name("redisson_lock__channel", key_);
      // Redisson's "<client uuid>:<thread id>", with the lock object's owner in place of the
      // thread: identity per owner (lock object), never per calling thread.
      const auto id = static_cast<std::uint64_t>(spi::sha256_int64(owner())) & 0x7fffffffffffffffULL;
      field_ = cfg.client_id + ":" + std::to_string(id);
      // RFairLock wakes each waiter on its own channel: redisson_lock__channel:{name}:<owner>.
      if (cfg.lock_mode == mode::fair) channel_ += ":" + field_;
    }
  }

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    milliseconds pttl{};
    return attempt(ec, pttl);
  }

  // Notified waiting: subscribe, then try again (a release between the failed try and the
  // subscription is not missed), wait for the release message or the holder's PTTL, retry.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept override {
    milliseconds pttl{};
    auto got = attempt(ec, pttl);
    if (got || ec) return got;
    auto sub = shared_->subscriber_for_waits();
    std::shared_ptr<channel_state> channel;
    if (sub) channel = sub->subscribe(channel_, ec);
    if (ec) {
      // No subscriber connection: fall back to the core's jittered polling rather than fail.
      ec.clear();
      return distributed_lock::do_acquire_until(deadline, ec);
    }
    struct unsubscribe_at_exit {
      subscriber* s;
      const std::string& ch;
      ~unsubscribe_at_exit() {
        if (s) s->unsubscribe(ch);
      }
    } guard{sub.get(), channel_};
    const bool fair = shared_->config.lock_mode == mode::fair;
    for (;;) {
      const auto seen = channel->generation();
      got = attempt(ec, pttl, fair);
      if (got || ec) {
        if (ec && fair) leave_queue();
        return got;
      }
      const auto now = clock::now();
      if (now >= deadline) {
        if (fair) leave_queue();
        return nullptr;
      }
      // Fair: the script answers with the time until our turn could come; never trust it beyond
      // the lock's own ttl, and never spin on a zero answer.
      if (fair) pttl = std::clamp(pttl, milliseconds(10), options().ttl);
      // PTTL -1 (a key without expiry, e.g. a redis-py Lock with timeout=None) never publishes:
      // bound that wait by the poll ceiling. Otherwise the holder's TTL bounds it.
      const auto bound = pttl > milliseconds::zero() ? pttl + milliseconds(1) : options().poll.max;
      const auto until = deadline - now > bound ? now + bound : deadline;
      channel->wait(seen, until);
    }
  }

 private:
  // One try. Fair mode: `enqueue` joins the queue on a miss (a waiter); otherwise a miss leaves
  // the queue untouched (try_acquire).
  std::unique_ptr<spi::lease_state> attempt(std::error_code& ec, milliseconds& pttl, bool enqueue = false) noexcept {
    try {
      auto c = shared_->connections->checkout(ec);
      if (ec) return nullptr;
      const auto ttl = options().ttl;
      const auto start = clock::now();
      reply_ptr r;
      std::string secret;
      if (shared_->config.lock_mode == mode::simple) {
        secret = spi::random_token();  // 128 random bits per grant
        r = c->eval(scripts::simple_acquire, {key_, fence_key_}, {secret, ms_text(ttl)}, ec);
      } else if (shared_->config.lock_mode == mode::reentrant) {
        secret = field_;
        r = c->eval(scripts::reentrant_acquire, {key_, fence_key_}, {ms_text(ttl), field_}, ec);
      } else {
        secret = field_;
        r = c->eval(enqueue ? scripts::fair_enqueue : scripts::fair_try, {key_, queue_key_, timeout_key_, fence_key_},
                    {ms_text(ttl), field_, ms_text(shared_->config.fair_wait), now_ms()}, ec);
      }
      if (ec) return nullptr;
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
          r->element[1]->type != REDIS_REPLY_INTEGER) {
        set_error(ec, errc::backend_error,
                  "redis: acquiring lock '" + std::string(name()) + "': unexpected reply " +
                      std::string(error_text(r.get())) +
                      (is_error(r.get(), "WRONGTYPE") ? " (the key holds another client's lock format)" : ""));
        return nullptr;
      }
      const bool acquired = shared_->config.lock_mode == mode::simple ? r->element[0]->integer == 1
                                                                      : r->element[0]->integer == -1;
      if (!acquired) {
        pttl = milliseconds(shared_->config.lock_mode == mode::simple ? r->element[1]->integer : r->element[0]->integer);
        return nullptr;
      }
      return std::make_unique<redis_lease>(shared_, std::string(name()), key_, std::move(secret), ttl, start,
                                           static_cast<std::uint64_t>(r->element[1]->integer));
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
  }

  // Redisson's acquireFailed: a waiter that gives up leaves the queue.
  void leave_queue() noexcept {
    std::error_code ec;
    auto c = shared_->connections->checkout(ec);
    if (ec) return;  // its queue entry times out after fair_wait, as a crashed Java waiter's does
    try {
      (void)c->eval(scripts::fair_cancel, {queue_key_, timeout_key_, key_, redisson_prefix_name("redisson_lock__channel", key_)},
                    {field_, ms_text(shared_->config.fair_wait), "publish"}, ec);
    } catch (...) {
    }
  }

  std::shared_ptr<shared> shared_;
  std::string key_, fence_key_, channel_, field_, queue_key_, timeout_key_;
};

}  // namespace

std::string redisson_prefix_name(std::string_view prefix, std::string_view name) {
  std::string out(prefix);
  if (name.find('{') != std::string_view::npos) {
    out += ":";
    out += name;
  } else {
    out += ":{";
    out += name;
    out += "}";
  }
  return out;
}

std::shared_ptr<subscriber> shared::subscriber_for_waits() noexcept {
  std::lock_guard lock(mutex_);
  if (!subscriber_) {
    try {
      subscriber_ = std::make_shared<subscriber>(config.where);
    } catch (...) {
      return nullptr;
    }
  }
  return subscriber_;
}

capabilities caps_of(mode m) noexcept {
  capabilities c{capability::blocking, capability::expiring, capability::renewable, capability::fencing,
                 capability::lost_notification};
  if (m != mode::simple) c = c.with(capability::reentrant);
  if (m == mode::fair) c = c.with(capability::fair);
  return c;
}

settings parse_settings(const uri& u, mode m) {
  settings s;
  s.lock_mode = m;
  if (u.hosts().size() != 1)
    throw error(errc::invalid_uri, "redis: " + u.redacted() + ": expected exactly one host (use redlock:// for several)");
  s.where.host = u.hosts()[0].host.empty() ? "127.0.0.1" : u.hosts()[0].host;
  s.where.port = u.hosts()[0].port_or(6379);
  s.where.user = u.user();
  s.where.password = u.password();
  if (!u.path().empty() && u.path() != "/") {
    int db = -1;
    const auto p = std::string_view(u.path()).substr(1);
    auto [ptr, err] = std::from_chars(p.data(), p.data() + p.size(), db);
    if (err != std::errc() || ptr != p.data() + p.size() || db < 0)
      throw error(errc::invalid_uri, "redis: " + u.redacted() + ": the path must be a database number, like /0");
    s.where.db = db;
  }
  if (auto v = u.get_duration("connect_timeout")) s.where.connect_timeout = *v;
  if (auto v = u.get_duration("command_timeout")) s.where.command_timeout = *v;
  if (auto v = u.get_int("pool_size", 1, 1024)) s.pool_size = static_cast<std::size_t>(*v);
  if (auto v = u.get("prefix")) s.prefix = *v;
  s.client_id = u.get("client_id").value_or(random_uuid());
  if (auto v = u.get_duration("fair_wait")) s.fair_wait = *v;
  return s;
}

redis_backend::redis_backend(const uri& u, const lock_options& defaults, mode m)
    : backend(caps_of(m), lock_scope::network, name_limits{4096}, defaults, u.redacted()) {
  auto s = std::make_shared<shared>();
  s->config = parse_settings(u, m);
  s->connections = std::make_shared<pool>(s->config.where, s->config.pool_size);
  // Connect now, so a wrong password, an unreachable host or a non-Redis server fails at open.
  std::error_code ec;
  { auto probe = s->connections->checkout(ec); }
  if (ec) throw error(ec, last_error_message());
  shared_ = std::move(s);
}

std::unique_ptr<distributed_lock> redis_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<redis_lock>(shared_, std::move(name), caps(), std::move(options));
}

}  // namespace dlock::redis
