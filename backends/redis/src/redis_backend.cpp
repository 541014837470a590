#include "redis_backend.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <span>
#include <vector>

#include "capabilities.hpp"
#include "redis_primitives.hpp"
#include "renewal.hpp"
#include "scripts.hpp"
#include "shared_scripts.hpp"

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

// How a script is sent: EVALSHA (cached; NOSCRIPT falls back to EVAL), or always as source when
// the request must run although its reply may never be read.
enum class sending { cached, source };

reply_ptr run(connection& c, sending how, const script& s, const std::vector<std::string_view>& keys,
              const std::vector<std::string_view>& args, std::error_code& ec) {
  return how == sending::cached ? c.eval(s, keys, args, ec) : c.eval_source(s, keys, args, ec);
}

// One script call: the script, its keys and its arguments (owned, for calls built here).
struct script_call {
  const script* s;
  std::vector<std::string> keys, args;
  std::vector<std::string_view> key_views() const { return {keys.begin(), keys.end()}; }
  std::vector<std::string_view> arg_views() const { return {args.begin(), args.end()}; }
};

// Undoes one grant (one hold in the Redisson layouts) of `key` by `owner` (the token, or the owner
// field): compare-and-delete, publishing the release to the mutex's waiters and to the name's
// reader-writer lock waiters. The lease's release and the clean-up of a grant whose reply was lost
// both use it.
script_call release_call(const settings& cfg, const std::string& name, const std::string& key, const std::string& owner,
                         milliseconds ttl) {
  auto k = keys_for(cfg.prefix, cfg.lock_mode, name);
  if (cfg.lock_mode == mode::simple)
    return {&scripts::simple_release, {key, std::move(k.channel), std::move(k.rw_channel)}, {owner}};
  if (cfg.lock_mode == mode::reentrant)
    return {&scripts::reentrant_release,
            {key, std::move(k.channel), std::move(k.rw_channel)},
            {"0", ms_text(ttl), owner, std::string(publish_command(cfg))}};
  return {&scripts::fair_release,
          {key, std::move(k.queue), std::move(k.timeout), std::move(k.channel), std::move(k.rw_channel)},
          {"0", ms_text(ttl), owner, now_ms(), std::string(publish_command(cfg))}};
}

// release_call on a connection of one's own (the background clean-ups).
reply_ptr release_grant(connection& c, const settings& cfg, const std::string& name, const std::string& key,
                        const std::string& owner, milliseconds ttl, std::error_code& ec,
                        sending how = sending::cached) {
  const auto call = release_call(cfg, name, key, owner, ttl);
  return run(c, how, as_published(cfg, *call.s), call.key_views(), call.arg_views(), ec);
}

// The trailer that makes a grant or a renewal wait for min_replicas replicas (none without it).
std::vector<std::string_view> replica_wait(const settings& cfg) {
  return cfg.replicas.wanted() ? cfg.replicas.wait_command() : std::vector<std::string_view>{};
}

// A request the pipeline withdrew: its caller's deadline passed while every connection was busy.
void set_withdrawn_error(std::error_code& ec, const shared& s, std::string_view doing) {
  set_error(ec, errc::backend_unavailable,
            "redis " + server_label(s) + ": " + std::string(doing) + ": not sent: all " +
                std::to_string(s.config.pool_size) +
                " connections (pool_size) stayed busy with other requests until the deadline (connect_timeout " +
                std::to_string(s.config.where.connect_timeout.count()) +
                "ms for a call without one, the lease's validity for a release or renewal); raise pool_size");
}

// The acquire scripts answer {1, token} | {0, pttl, quiet} (simple) or {-1, token} |
// {pttl, -1, quiet} (Redisson layouts), or {-3, permits, what} when the name is a semaphore's.
// nullopt: not such an answer (an error reply).
std::optional<bool> granted_by(const redisReply* r, mode m) noexcept {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_INTEGER)
    return std::nullopt;
  if (r->element[0]->integer == -3) return false;
  if (r->element[1]->type != REDIS_REPLY_INTEGER) return std::nullopt;
  return m == mode::simple ? r->element[0]->integer == 1 : r->element[0]->integer == -1;
}

// A "held" answer's third element: 1 when the holder publishes nothing on release (a redis-py
// Lock), so only another try can find it gone.
bool holder_is_quiet(const redisReply* r) noexcept {
  return r->elements >= 3 && r->element[2]->type == REDIS_REPLY_INTEGER && r->element[2]->integer == 1;
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
        fencing_(fencing),
        held_id_(shared_->add_held(this, key_, secret_)) {
    // Watch the server from now on: its subscriber connection notices a stop or a restart at
    // once, and the held leases are then checked without waiting for their next renewal.
    shared_->watch_server_of(key_);
  }
  ~redis_lease() override { shared_->remove_held(held_id_); }

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fencing_; }
  spi::renewal_batch* batch() const noexcept override { return shared_->renewals.get(); }

  // For renew_in_one_pipeline (renewal.hpp), and do_renew.
  void judge_renewal(const redisReply& r, std::error_code& ec) const { judge_renewal_reply(r, what(), ec); }
  void judge_replicas(const redisReply* wait_reply, std::error_code& ec) const {
    judge_renewal_replicas(*shared_, wait_reply, what(), ec);
  }
  renewal_request renewal(const std::string& ttl_text) const { return {&renew_script(), {key_}, renew_args(ttl_text)}; }
  // A release or renewal waits for a pooled connection while the grant is valid: after that it
  // is moot, and before it giving up would leave the lock taken until its ttl.
  clock::time_point connection_deadline() const noexcept {
    return std::max(valid_until(), clock::now() + shared_->config.where.connect_timeout);
  }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    const auto& cfg = shared_->config;
    reply_ptr r;
    try {
      const auto call = release_call(cfg, name(), key_, secret_, ttl());
      auto out =
          shared_->eval(*call.s, call.key_views(), call.arg_views(), connection_deadline(), milliseconds::zero(), ec);
      if (out.withdrawn) set_withdrawn_error(ec, *shared_, "releasing lock '" + name() + "'");
      r = std::move(out.reply);
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
      set_error(ec, errc::not_owner,
                "redis: lock '" + name() +
                    "' was no longer ours at release (it expired or was deleted, and may "
                    "belong to someone else now); the work done under it was not protected");
    }
  }

  void do_renew(milliseconds ttl, std::error_code& ec) noexcept override {
    reply_ptr r;
    try {
      const auto ttl_text = ms_text(ttl);
      auto out = shared_->eval(renew_script(), {key_}, renew_args(ttl_text), connection_deadline(),
                               milliseconds::zero(), ec, false, replica_wait(shared_->config));
      if (out.withdrawn) set_withdrawn_error(ec, *shared_, "renewing lock '" + name() + "'");
      r = std::move(out.reply);
      if (ec) return;
      judge_renewal(*r, ec);
      if (!ec) judge_replicas(out.trailer.get(), ec);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory renewing");
    }
  }

  // The renewal script and its arguments for this grant.
  const script& renew_script() const noexcept {
    return shared_->config.lock_mode == mode::simple ? scripts::simple_renew : scripts::reentrant_renew;
  }
  std::vector<std::string_view> renew_args(const std::string& ttl_text) const {
    if (shared_->config.lock_mode == mode::simple) return {secret_, ttl_text};
    return {ttl_text, secret_};
  }

 private:
  std::string what() const { return "lock '" + name() + "'"; }

  std::shared_ptr<shared> shared_;
  std::string key_, secret_;
  std::uint64_t fencing_;
  std::uint64_t held_id_;
};

class redis_lock final : public distributed_lock {
 public:
  redis_lock(std::shared_ptr<shared> s, const std::string& name, capabilities caps, lock_options options)
      : distributed_lock(name, caps, std::move(options)), shared_(std::move(s)) {
    const auto& cfg = shared_->config;
    auto keys = keys_for(cfg.prefix, cfg.lock_mode, name);
    key_ = std::move(keys.key);
    fence_key_ = std::move(keys.fence);
    channel_ = std::move(keys.channel);
    queue_key_ = std::move(keys.queue);
    timeout_key_ = std::move(keys.timeout);
    waiting_key_ = std::move(keys.waiting);
    permits_key_ = std::move(keys.permits);
    rw_channel_ = std::move(keys.rw_channel);
    if (cfg.lock_mode != mode::simple) {
      field_ = redisson_owner_field(cfg, owner());
      // RFairLock wakes each waiter on its own channel: redisson_lock__channel:{name}:<owner>.
      if (cfg.lock_mode == mode::fair) channel_ += ":" + field_;
    }
  }

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    held_answer held;
    return attempt(ec, held);
  }

  // Notified waiting: subscribe, then try again (a release between the failed try and the
  // subscription is not missed), wait for the release message or the holder's PTTL, retry. One
  // message wakes one waiter of this process (subscriber.hpp), the oldest; a newcomer finding
  // waiters of this process already in line joins it instead of trying first. No pooled
  // connection is held while waiting: each try checks one out for its script only.
  // A holder that publishes nothing (a redis-py Lock: the script says so) is tried again at
  // least every poll.max. The mutex counts as a writer of the name's reader-writer lock: each try
  // keeps an entry in its waiting-writers set, which holds new readers back, so the waits are also
  // bounded by a third of the ttl (the entry expires a ttl after the last try); leaving without
  // the lock takes the entry out.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    std::string entry;
    try {
      entry = "mutex:" + spi::random_token();
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
    held_answer held;
    auto got = wait_notified(deadline, ec, entry, held);
    // The core's polling (no subscriber) grants by tries that leave the set alone.
    if (held.entry_written && (!got || held.polled)) give_up_waiting(entry);
    return got;
  }

 private:
  // What a try that was not granted learnt: how long the holder may keep the lock (its PTTL, or
  // for a fair waiter the time until its turn could come), whether a release message can come,
  // and whether the try left an entry in the waiting-writers set.
  struct held_answer {
    milliseconds pttl{};
    bool quiet = false;
    bool entry_written = false;
    bool polled = false;  // the wait went on as the core's polling
  };

  std::unique_ptr<spi::lease_state> wait_notified(clock::time_point deadline, std::error_code& ec,
                                                  const std::string& entry, held_answer& held) noexcept {
    const bool fair = shared_->config.lock_mode == mode::fair;
    auto sub = shared_->subscriber_for_waits();
    // Already subscribed for another waiter here: releases from now on reach this process, so
    // no try is needed between joining and waiting. (Fair mode waits on a channel of its own.)
    auto channel = sub && !fair ? sub->join_subscribed(channel_) : nullptr;
    struct unsubscribe_at_exit {
      subscriber* s = nullptr;
      const std::string& ch;
      ~unsubscribe_at_exit() {
        if (s) s->unsubscribe(ch);
      }
    } guard{channel ? sub.get() : nullptr, channel_};
    std::optional<channel_waiter> place;
    if (channel) place.emplace(channel);
    bool try_now = !place || !place->has_others_waiting() ||
                   (shared_->config.lock_mode == mode::reentrant && shared_->holds(key_, field_));
    if (!channel) {
      auto got = attempt(ec, held, false, deadline, entry);
      if (got || ec) return got;
      if (sub) channel = sub->subscribe(channel_, ec);
      if (!channel) {
        // No subscriber connection: fall back to the core's jittered polling rather than fail.
        ec.clear();
        held.polled = true;
        return distributed_lock::do_acquire_until(deadline, ec);
      }
      guard.s = sub.get();
      place.emplace(channel);
      try_now = true;  // the try above preceded the subscription
    }
    for (;;) {
      if (try_now) {
        auto got = attempt(ec, held, fair, deadline, entry);
        if (got) return got;
        if (ec) {
          place->pass_on();
          if (fair) leave_queue();
          return nullptr;
        }
      }
      try_now = true;
      const auto now = clock::now();
      if (now >= deadline) {
        if (fair) leave_queue();
        return nullptr;
      }
      auto pttl = held.pttl;
      // Fair: the script answers with the time until our turn could come; never trust it beyond
      // the lock's own ttl, and never spin on a zero answer.
      if (fair) pttl = std::clamp(pttl, milliseconds(10), options().ttl);
      // PTTL -1 (a key without expiry, e.g. a redis-py Lock with timeout=None) bounds the wait by
      // the poll ceiling, as the wait of a newcomer that queued without a try; otherwise the
      // holder's TTL bounds it, and poll.max too when no release message will come.
      auto bound = pttl > milliseconds::zero() ? pttl + milliseconds(1) : options().poll.max;
      if (held.quiet) bound = std::min(bound, options().poll.max);
      if (held.entry_written) bound = std::min(bound, std::max(options().ttl / 3, milliseconds(1)));
      const auto until = deadline - now > bound ? now + bound : deadline;
      place->wait(until);
    }
  }

  // A waiter that leaves without the lock takes its entry out of the waiting-writers set, and
  // wakes the readers it held back (when this fails, the entry expires a ttl after its last try).
  void give_up_waiting(const std::string& entry) noexcept {
    try {
      std::error_code ec;
      (void)shared_->eval(scripts::rw_writer_gives_up, {waiting_key_, key_, rw_channel_}, {entry},
                          clock::now() + shared_->config.where.connect_timeout, milliseconds::zero(), ec);
    } catch (...) {
    }
  }

  // One try. Fair mode: `enqueue` joins the queue on a miss (a waiter); otherwise a miss leaves
  // the queue untouched (try_acquire). `entry`: a waiter's entry in the waiting-writers set,
  // written by a miss and taken out by the grant ('' for try_acquire).
  // `deadline`: how long the request may wait for its turn on a connection (the caller's own
  // deadline; for try_acquire, connect_timeout). When it passes first, an acquire_until gets a
  // plain miss (pttl 0: its own deadline ends the wait) and a try_acquire an error.
  std::unique_ptr<spi::lease_state> attempt(std::error_code& ec, held_answer& held, bool enqueue = false,
                                            std::optional<clock::time_point> deadline = std::nullopt,
                                            std::string_view entry = {}) noexcept {
    try {
      const auto& cfg = shared_->config;
      const auto ttl = options().ttl;
      const auto ttl_text = ms_text(ttl);
      const script* s = nullptr;
      std::vector<std::string_view> keys, args;
      std::string secret;
      std::string fair_wait_text, now_text;
      if (cfg.lock_mode == mode::simple) {
        // 128 random bits per grant, marked as dlock's: a waiter that finds this token knows a
        // release message will come (a redis-py token has no such mark).
        secret = "dlock:" + spi::random_token();
        s = &scripts::simple_acquire;
        keys = {key_, fence_key_, waiting_key_, permits_key_};
        args = {secret, ttl_text, entry};
      } else if (cfg.lock_mode == mode::reentrant) {
        secret = field_;
        s = &scripts::reentrant_acquire;
        keys = {key_, fence_key_, waiting_key_, permits_key_};
        args = {ttl_text, field_, entry};
      } else {
        secret = field_;
        fair_wait_text = ms_text(cfg.fair_wait);
        now_text = now_ms();
        s = enqueue ? &scripts::fair_enqueue : &scripts::fair_try;
        keys = {key_, queue_key_, timeout_key_, fence_key_, waiting_key_, permits_key_};
        args = {ttl_text, field_, fair_wait_text, now_text, entry};
      }
      // Before the request can reach the server: the grant's validity counts from here.
      const auto start = clock::now();
      // With wait_after_restart, sent only to a server at least a ttl old: a server that
      // restarted without persistence has forgotten every lock; granting nothing for one ttl lets
      // every holder from before the restart reach its validity deadline (its watchdog fires
      // lost) before anyone else holds the lock.
      const auto min_age = cfg.wait_after_restart ? ttl : milliseconds::zero();
      // With min_replicas, WAIT follows the script on its connection: it counts the replicas that
      // have the grant and its fencing counter (replication.hpp).
      auto out = shared_->eval(*s, keys, args, deadline.value_or(start + cfg.where.connect_timeout), min_age, ec, false,
                               replica_wait(cfg));
      if (out.withdrawn) {
        if (!deadline) set_withdrawn_error(ec, *shared_, "acquiring lock '" + std::string(name()) + "'");
        held.pttl = milliseconds::zero();
        held.quiet = false;
        return nullptr;
      }
      if (out.server_young > milliseconds::zero()) {
        // "held by someone else" until then: waiters wait, try_acquire says no
        held.pttl = out.server_young;
        held.quiet = false;
        shared_->note_young_server(out.run_id, out.server_young, ttl);
        return nullptr;
      }
      if (ec) {
        if (out.reply) {  // the grant's reply came, WAIT's did not: a grant nobody may count
          if (granted_by(out.reply.get(), cfg.lock_mode).value_or(false)) give_back(secret, start + ttl);
        } else if (out.late) {
          undo_unanswered(std::move(out.late), out.late_index, std::move(secret), enqueue, start + ttl);
        }
        return nullptr;
      }
      const auto& r = out.reply;
      if (is_name_conflict(r.get())) {
        set_name_conflict(ec, name(), key_, *r, "a mutex");
        return nullptr;
      }
      const auto acquired = granted_by(r.get(), cfg.lock_mode);
      if (!acquired) {
        set_error(ec, errc::backend_error,
                  "redis: acquiring lock '" + std::string(name()) + "': unexpected reply " +
                      std::string(error_text(r.get())) +
                      (is_error(r.get(), "WRONGTYPE") ? " (the key holds something else: another client's data)" : ""));
        return nullptr;
      }
      if (!*acquired) {
        held.pttl = milliseconds(cfg.lock_mode == mode::simple ? r->element[1]->integer : r->element[0]->integer);
        held.quiet = holder_is_quiet(r.get());
        held.entry_written = held.entry_written || !entry.empty();
        return nullptr;
      }
      const auto token = static_cast<std::uint64_t>(r->element[1]->integer);
      if (cfg.replicas.wanted() && replication::confirmed(out.trailer.get()) < cfg.replicas.min_replicas) {
        give_back(secret, start + ttl);
        cfg.replicas.set_short_error(
            ec, server_label(*shared_),
            "lock '" + std::string(name()) + "' was granted (fencing token " + std::to_string(token) + ")",
            out.trailer.get(), "released it: a grant counts only once min_replicas replicas have it");
        return nullptr;
      }
      return std::make_unique<redis_lease>(shared_, std::string(name()), key_, std::move(secret), ttl, start, token);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
  }

  // The acquire request went out but its reply was lost (command_timeout, dropped connection):
  // the server may have granted the lock to nobody, and it would stay taken for a ttl. Undo it in
  // the background. On an intact connection (a timeout) the undo goes after the request on the
  // same connection (`late`, shared with the rest of its batch), so it runs after the grant,
  // whenever the server gets to it; on a broken connection the request has run or never will,
  // and the token's compare-and-delete is exact.
  void undo_unanswered(std::shared_ptr<late_replies> late, std::size_t index, std::string owner, bool enqueued,
                       clock::time_point expires_at) noexcept {
    try {
      auto task = [s = shared_.get(), late = std::move(late), index, owner = std::move(owner),
                   name = std::string(name()), key = key_, queue = queue_key_, timeout = timeout_key_, enqueued,
                   expires_at, ttl = options().ttl](std::stop_token stop) mutable {
        const auto& cfg = s->config;
        constexpr milliseconds slice{100};  // so a stopping backend is not held up
        if (auto outcome = late->take(index, slice, stop, expires_at)) {
          // Once sent, the undo runs even if its own reply is lost: it follows on this connection.
          const bool sent = late->with_connection([&](connection& c) {
            std::error_code ec;
            if (granted_by(outcome.get(), cfg.lock_mode).value_or(false))
              (void)release_grant(c, cfg, name, key, owner, ttl, ec, sending::source);
            else if (cfg.lock_mode == mode::fair && enqueued)
              (void)c.eval_source(scripts::fair_cancel,
                                  {queue, timeout, key, redisson_prefix_name("redisson_lock__channel", key)},
                                  {owner, ms_text(cfg.fair_wait), publish_command(cfg)}, ec);
          });
          if (sent || !granted_by(outcome.get(), cfg.lock_mode).value_or(false)) return;
        }
        late.reset();                               // lets the dead connection go (dropped) before opening another
        if (cfg.lock_mode != mode::simple) return;  // a Redisson owner field's count cannot tell: it expires
        for (auto pause = milliseconds(50); !stop.stop_requested() && clock::now() < expires_at;
             pause = std::min(pause * 2, milliseconds(1000))) {
          std::error_code ec;
          if (auto fresh = s->checkout_for(key, ec); !ec) {
            (void)release_grant(*fresh, cfg, name, key, owner, ttl, ec);
            if (!ec) return;
          }
          worker::pause(stop, pause);
        }
      };
      shared_->post(std::move(task));
    } catch (...) {
      // out of memory: the grant, if any, expires at its ttl as before
    }
  }

  // A grant that must not count (too few replicas confirmed it, or WAIT's reply was lost): given
  // back at once, else in the background until it would have expired anyway. The grant's reply
  // was read, so it has run: a release on any connection comes after it.
  void give_back(const std::string& owner, clock::time_point expires_at) noexcept {
    try {
      const auto& cfg = shared_->config;
      const auto call = release_call(cfg, std::string(name()), key_, owner, options().ttl);
      std::error_code ec;
      auto out = shared_->eval(*call.s, call.key_views(), call.arg_views(), clock::now() + cfg.where.connect_timeout,
                               milliseconds::zero(), ec);
      if (!ec && !out.withdrawn) return;
      shared_->post([s = shared_.get(), call, expires_at](std::stop_token stop) {
        for (auto pause = milliseconds(50); !stop.stop_requested() && clock::now() < expires_at;
             pause = std::min(pause * 2, milliseconds(1000))) {
          std::error_code ec;
          if (auto fresh = s->checkout_for(call.keys.front(), ec); !ec) {
            (void)fresh->eval(as_published(s->config, *call.s), call.key_views(), call.arg_views(), ec);
            if (!ec) return;
          }
          worker::pause(stop, pause);
        }
      });
    } catch (...) {
      // out of memory: the grant expires at its ttl
    }
  }

  // Redisson's acquireFailed: a waiter that gives up leaves the queue.
  void leave_queue() noexcept {
    std::error_code ec;
    auto c = shared_->checkout_for(key_, ec);
    if (ec) return;  // its queue entry times out after fair_wait, as a crashed Java waiter's does
    try {
      (void)c->eval(scripts::fair_cancel,
                    {queue_key_, timeout_key_, key_, redisson_prefix_name("redisson_lock__channel", key_)},
                    {field_, ms_text(shared_->config.fair_wait), publish_command(shared_->config)}, ec);
    } catch (...) {
    }
  }

  std::shared_ptr<shared> shared_;
  std::string key_, fence_key_, channel_, field_, queue_key_, timeout_key_, waiting_key_, permits_key_, rw_channel_;
};

}  // namespace

const script& as_published(const settings& cfg, const script& s) {
  if (!cfg.sharded_pubsub) return s;
  static std::mutex mutex;
  static std::map<const script*, std::unique_ptr<script>> sharded;  // the scripts are static too
  std::lock_guard lock(mutex);
  auto& variant = sharded[&s];
  if (!variant) {
    std::string source = s.source;
    static constexpr std::string_view plain = "redis.call('publish',", spublish = "redis.call('spublish',";
    for (auto at = source.find(plain); at != std::string::npos; at = source.find(plain, at + spublish.size()))
      source.replace(at, plain.size(), spublish);
    variant = std::make_unique<script>(std::move(source));
  }
  return *variant;
}

std::string_view publish_command(const settings& cfg) noexcept { return cfg.sharded_pubsub ? "spublish" : "publish"; }

bool is_name_conflict(const redisReply* r) noexcept {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
         r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == -3 &&
         r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2]->type == REDIS_REPLY_STRING;
}

void set_name_conflict(std::error_code& ec, std::string_view name, std::string_view key, const redisReply& r,
                       std::string_view wanted) {
  const std::string in_use_as(r.element[2]->str, r.element[2]->len);
  const auto permits = r.element[1]->integer;
  std::string what = "redis: '" + std::string(name) + "' is in use as a " + in_use_as;
  if (in_use_as == "semaphore") {
    // Redisson's layout keeps a semaphore's count key after its last permit is returned; taking
    // the name for a lock would mean deleting it under a Redisson client that relies on it.
    what += permits > 0
                ? " (" + std::to_string(permits) + (permits == 1 ? " permit" : " permits") + " held on the server)"
                : " (no permit is held now, but its count key '" + std::string(key) +
                      "' stays after the last permit is returned, as Redisson keeps it; deleting that key "
                      "frees the name for a lock)";
  } else {
    what += " (held now)";
  }
  set_error(ec, errc::name_conflict,
            what + "; " + std::string(wanted) + " of the same name cannot be taken: use another name");
}

key_names keys_for(std::string_view prefix, mode m, std::string_view name) {
  key_names k;
  k.key = std::string(prefix) + std::string(name);
  k.fence = redisson_prefix_name("redisson_lock_token", k.key);
  k.channel = redisson_prefix_name("redisson_lock__channel", k.key);
  if (m == mode::fair) {
    k.queue = redisson_prefix_name("redisson_lock_queue", k.key);
    k.timeout = redisson_prefix_name("redisson_lock_timeout", k.key);
  }
  k.waiting = redisson_suffix_name(k.key, "dlock_writers_waiting");
  k.permits = redisson_suffix_name(k.key, "timeout");
  k.rw_channel = redisson_prefix_name("redisson_rwlock", k.key);
  return k;
}

std::string redisson_owner_field(const settings& cfg, std::string_view owner) {
  const auto id = static_cast<std::uint64_t>(spi::sha256_int64(owner)) & 0x7fffffffffffffffULL;
  return cfg.client_id + ":" + std::to_string(id);
}

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
      opener open;
      if (sentinels)
        open = [w = sentinels](const endpoint& where, std::error_code& ec) { return w->open_master(where, ec); };
      else if (cluster)
        open = [c = cluster.get()](const endpoint& where, std::error_code& ec) { return c->open_any(where, ec); };
      std::optional<shard_routing> shards;
      if (config.sharded_pubsub) {
        shards.emplace();
        shards->route = [c = cluster.get()](std::string_view channel) -> std::optional<endpoint> {
          std::error_code ec;
          if (auto n = c->for_slot(key_slot(channel), ec)) return n->connections->where();
          return std::nullopt;
        };
        shards->moved = [c = cluster.get()] { c->mark_stale(); };
      }
      // A dropped subscriber connection: the server restarted or stopped, or (cluster) a master
      // died, whose slots are served elsewhere once its replica is promoted.
      auto dropped = [this] {
        if (cluster) cluster->mark_stale();
        check_held_soon();
      };
      subscriber_ = std::make_shared<subscriber>(config.where, std::move(dropped), std::move(open), std::move(shards));
    } catch (...) {
      return nullptr;
    }
  }
  return subscriber_;
}

void shared::watch_server_of(std::string_view key) noexcept {
  auto sub = subscriber_for_waits();
  if (!sub || !cluster) return;  // one server: the subscriber's own connection watches it
  std::error_code ec;
  if (auto n = node_for(key, ec)) sub->watch(n->connections->where());
}

shared::~shared() {
  if (sentinels) sentinels->stop();  // its thread calls master_moved()
  // A handle may outlive us (see the header): the pools' listeners must not call back.
  if (single) single->connections->on_server_change({});
  if (cluster)
    for (const auto& n : cluster->known()) n->connections->on_server_change({});
}

std::shared_ptr<node> shared::node_for(std::string_view key, std::error_code& ec) noexcept {
  if (single) return single;
  return cluster->for_slot(key_slot(key), ec);
}

pool::handle shared::checkout_for(std::string_view key, std::error_code& ec) noexcept {
  return checkout_for(key, clock::now() + config.where.connect_timeout, ec);
}

pool::handle shared::checkout_for(std::string_view key, clock::time_point deadline, std::error_code& ec) noexcept {
  auto n = node_for(key, ec);
  if (!n) return {};
  return n->connections->checkout(deadline, ec);
}

namespace {

// An ASK answer: this one script goes to the node importing the slot, right after ASKING on the
// same connection. Sent with its source (EVALSHA's NOSCRIPT retry would need a second ASKING);
// migrations are rare, so it is not pipelined.
pipeline::outcome eval_after_asking(node& target, const script& s, const std::vector<std::string_view>& keys,
                                    const std::vector<std::string_view>& args, clock::time_point deadline,
                                    std::error_code& ec, const std::vector<std::string_view>& trailer) noexcept {
  pipeline::outcome out;
  auto c = target.connections->checkout(deadline, ec);
  if (ec) return out;
  if (auto asking = c->command({"ASKING"}, ec); ec) return out;
  out.reply = c->eval_source(s, keys, args, ec);
  if (!ec && !trailer.empty()) out.trailer = c->command(trailer, ec);
  return out;
}

}  // namespace

pipeline::outcome shared::eval(const script& s, const std::vector<std::string_view>& keys,
                               const std::vector<std::string_view>& args, clock::time_point deadline,
                               milliseconds min_server_age, std::error_code& ec, bool source_only,
                               const std::vector<std::string_view>& trailer) noexcept {
  const auto routing_key = keys.empty() ? std::string_view{} : keys.front();
  auto n = node_for(routing_key, ec);
  if (!n) return {};
  if (!cluster) return n->requests->eval(s, keys, args, deadline, min_server_age, ec, source_only, trailer);
  return eval_on_cluster(std::move(n), as_published(config, s), keys, args, deadline, min_server_age, ec, source_only,
                         trailer);
}

// Not const although it changes no member: a MOVED answer updates the cluster's slot map (cluster->moved).
// NOLINTNEXTLINE(readability-make-member-function-const)
pipeline::outcome shared::eval_on_cluster(std::shared_ptr<node> n, const script& s,
                                          const std::vector<std::string_view>& keys,
                                          const std::vector<std::string_view>& args, clock::time_point deadline,
                                          milliseconds min_server_age, std::error_code& ec, bool source_only,
                                          const std::vector<std::string_view>& trailer) noexcept {
  const auto routing_key = keys.empty() ? std::string_view{} : keys.front();
  // A slot moves at most a few times while one request is routed; more redirections in a row than
  // this mean the cluster's nodes disagree (a failover in progress): an outage, tried again later.
  constexpr int max_redirections = 5;
  auto pause = milliseconds(10);
  std::shared_ptr<node> asking;  // after an ASK: the next try goes there, once, after ASKING
  for (int redirections = 0;;) {
    auto out = asking ? eval_after_asking(*asking, s, keys, args, deadline, ec, trailer)
                      : n->requests->eval(s, keys, args, deadline, min_server_age, ec, source_only, trailer);
    asking.reset();
    if (ec || out.withdrawn || !out.reply || out.reply->type != REDIS_REPLY_ERROR) return out;
    const auto to = redirection_of(out.reply.get());
    // TRYAGAIN: a multi-key script while its slot is half migrated (some keys moved, or an importing
    // node asked for keys it does not have yet); CLUSTERDOWN: a failover in progress.
    const bool again = !to && (is_error(out.reply.get(), "TRYAGAIN") || is_error(out.reply.get(), "CLUSTERDOWN"));
    if (!to && !again) return out;  // the script's own error: the caller judges it
    if ((to && ++redirections > max_redirections) || (again && clock::now() + pause >= deadline)) {
      set_error(ec, errc::backend_unavailable,
                "redis " + cluster->label() + ": slot " + std::to_string(key_slot(routing_key)) +
                    " is moving (last answer: " + std::string(error_text(out.reply.get())) +
                    "); the request was not run, try again");
      out.reply.reset();
      return out;
    }
    if (again) {
      std::this_thread::sleep_for(pause);  // the migration moves the rest of the slot's keys meanwhile
      pause = std::min(pause * 2, milliseconds(200));
      redirections = 0;
      continue;  // from the slot's owner again: it answers ASK, or MOVED once the migration ends
    }
    if (to->ask) {
      asking = cluster->at(to->host, to->port);
    } else {
      n = cluster->moved(*to);
    }
    if (!asking && !n) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory following a redirection");
      return {};
    }
  }
}

void shared::master_moved() noexcept {
  single->connections->retire_all();  // also checks the held leases (the pool's server-change listener)
  std::lock_guard lock(mutex_);
  if (subscriber_) subscriber_->reconnect();
}

namespace {
std::string key_and_owner(std::string_view key, std::string_view owner) {
  std::string out(key);
  out += '\0';
  out += owner;
  return out;
}
}  // namespace

std::uint64_t shared::add_held(spi::lease_state* lease, std::string key, std::string owner) noexcept {
  std::lock_guard lock(held_mutex_);
  const auto id = ++next_held_id_;
  try {
    auto& h = held_.emplace(id, held{lease, std::move(key), std::move(owner)}).first->second;
    ++holds_[key_and_owner(h.key, h.owner)];
  } catch (...) {
    // out of memory: this lease is checked at its renewals only
  }
  return id;
}

void shared::remove_held(std::uint64_t id) noexcept {
  std::lock_guard lock(held_mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  try {
    if (auto h = holds_.find(key_and_owner(it->second.key, it->second.owner)); h != holds_.end() && --h->second == 0)
      holds_.erase(h);
  } catch (...) {
  }
  held_.erase(it);
}

bool shared::holds(const std::string& key, const std::string& owner) noexcept {
  try {
    std::lock_guard lock(held_mutex_);
    return holds_.contains(key_and_owner(key, owner));
  } catch (...) {
    return true;  // out of memory: try first, as without waiters
  }
}

void shared::note_young_server(const std::string& run_id, milliseconds left, milliseconds ttl) noexcept {
  try {
    {
      std::lock_guard lock(held_mutex_);
      if (run_id == young_run_id_reported_) return;
      young_run_id_reported_ = run_id;
    }
    report_background_error(
        make_error_code(errc::backend_unavailable),
        "redis " + config.where.label() + ": the server started less than a ttl (" + std::to_string(ttl.count()) +
            "ms) ago, or may have (its uptime_in_seconds counts whole wall-clock seconds: a second is "
            "added); no lock is granted for another " +
            std::to_string(left.count()) +
            "ms, so that holders from before a restart without persistence time out first "
            "(wait_after_restart=false turns this off for a server that persists every write)");
  } catch (...) {
  }
}

void shared::check_held_soon() noexcept {
  if (check_pending_.exchange(true)) return;  // one check at a time covers every trigger
  post([this](std::stop_token stop) { check_held(stop); });
}

// Asks the server, in one pipeline per node, whether each held key is still ours (GET == token, or
// the owner field present in a hash without 'mode': HMGET key owner mode, so a reader of the
// name's reader-writer lock with the same owner id is not taken for us), retrying until every node answers or every
// lease's validity has run out anyway; marks lost the leases whose grant is gone. Read-only: a lease is never extended
// here. A key whose slot moved meanwhile (MOVED, ASK) is asked again on the next round, after the map.
void shared::check_held(std::stop_token stop) noexcept {
  try {
    for (auto pause = std::chrono::milliseconds(50); !stop.stop_requested();
         pause = std::min(pause * 2, std::chrono::milliseconds(500))) {
      check_pending_ = false;  // a trigger from now on checks again
      std::vector<std::pair<std::uint64_t, held>> leases;
      auto latest_validity = clock::time_point::min();
      {
        std::lock_guard lock(held_mutex_);
        for (const auto& [id, h] : held_) {
          leases.emplace_back(id, h);
          latest_validity = std::max(latest_validity, h.lease->valid_until());
        }
      }
      if (leases.empty() || clock::now() >= latest_validity) return;
      // The leases by the node serving their key (one group on a single server).
      std::map<node*, std::pair<std::shared_ptr<node>, std::vector<const std::pair<std::uint64_t, held>*>>> by_node;
      bool all_answered = true;
      for (const auto& l : leases) {
        std::error_code ec;
        if (auto n = node_for(l.second.key, ec)) {
          auto& group = by_node[n.get()];
          group.first = n;
          group.second.push_back(&l);
        } else {
          all_answered = false;
        }
      }
      std::vector<std::uint64_t> gone;
      for (const auto& [raw, group] : by_node) {
        std::error_code ec;
        auto c = group.first->connections->checkout(ec);
        if (ec) {
          all_answered = false;
          continue;
        }
        bool sent = true;
        for (const auto* l : group.second)
          sent =
              sent && (config.lock_mode == mode::simple ? c->append({"GET", l->second.key})
                                                        : c->append({"HMGET", l->second.key, l->second.owner, "mode"}));
        if (!sent || !c->flush()) {
          all_answered = false;
          continue;
        }
        for (const auto* l : group.second) {
          auto r = c->read(ec);
          if (ec) break;
          if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {  // WRONGTYPE: another format's now
            // Not an answer about the key (a slot moving, a cluster failing over): ask again.
            if (auto to = redirection_of(r.get()); to && !to->ask && cluster) (void)cluster->moved(*to);
            all_answered = false;
            continue;
          }
          const bool ours = config.lock_mode == mode::simple
                                ? r->type == REDIS_REPLY_STRING && std::string_view(r->str, r->len) == l->second.owner
                                : r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                                      r->element[0]->type != REDIS_REPLY_NIL && r->element[1]->type == REDIS_REPLY_NIL;
          if (!ours) gone.push_back(l->first);
        }
        all_answered = all_answered && !ec && c->unanswered() == 0;
      }
      {
        std::lock_guard lock(held_mutex_);
        for (auto id : gone)
          if (auto it = held_.find(id); it != held_.end() && !it->second.lease->released())
            it->second.lease->mark_lost(make_error_code(errc::lock_lost));
      }
      if (all_answered) return;
      worker::pause(stop, pause);
    }
  } catch (...) {
    check_pending_ = false;
  }
}

settings parse_settings(const uri& u, mode m) {
  settings s;
  s.lock_mode = m;
  const bool via_sentinel = u.scheme().ends_with("+sentinel");
  const bool via_cluster = u.scheme().ends_with("+cluster");
  if (u.hosts().size() != 1 && !via_sentinel && !via_cluster)
    throw error(errc::invalid_uri, "redis: " + u.redacted() +
                                       ": expected exactly one host (use redlock:// for several independent masters, "
                                       "redis+cluster:// for a Redis Cluster, redis+sentinel:// for a Sentinel set)");
  s.where.host = u.hosts()[0].host.empty() ? "127.0.0.1" : u.hosts()[0].host;
  s.where.port = u.hosts()[0].port_or(6379);
  s.where.user = u.user();
  s.where.password = u.password();
  if (via_sentinel) {
    if (auto v = u.get_int("db", 0, 1 << 20)) s.where.db = static_cast<int>(*v);  // the path names the master set
  } else if (!via_cluster && !u.path().empty() && u.path() != "/") {
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
  s.client_id = u.get("client_id").value_or(spi::random_uuid());  // Redisson's id is UUID.randomUUID()
  if (auto v = u.get_duration("fair_wait")) s.fair_wait = *v;
  if (auto v = u.get_bool("wait_after_restart")) s.wait_after_restart = *v;
  s.where.learn_server_start = s.wait_after_restart;
  s.replicas = parse_replication(u, s.where.command_timeout);
  if (via_sentinel) s.sentinel = parse_sentinel_settings(u, s.where);
  if (via_cluster) {
    s.cluster_seeds = parse_cluster_seeds(u, s.where);
    if (auto v = u.get("pubsub")) {
      if (*v == "sharded")
        s.pubsub = settings::pubsub_choice::sharded;
      else if (*v == "classic")
        s.pubsub = settings::pubsub_choice::classic;
      else if (*v != "auto")
        throw error(errc::invalid_uri, "redis: " + u.redacted() + ": pubsub must be auto, sharded or classic, not '" +
                                           std::string(*v) + "'");
    }
  }
  return s;
}

namespace {

// The declared set (capabilities.hpp) of the scheme that serves mode `m`: on one server, through
// Sentinel or on a cluster.
constexpr capabilities declared_caps(mode m, std::string_view scheme) noexcept {
  const bool via_sentinel = scheme.ends_with("+sentinel"), via_cluster = scheme.ends_with("+cluster");
  switch (m) {
    case mode::simple: return via_sentinel ? redis_sentinel_caps : via_cluster ? redis_cluster_caps : redis_caps;
    case mode::reentrant:
      return via_sentinel  ? redis_reentrant_sentinel_caps
             : via_cluster ? redis_reentrant_cluster_caps
                           : redis_reentrant_caps;
    case mode::fair:
      return via_sentinel ? redis_fair_sentinel_caps : via_cluster ? redis_fair_cluster_caps : redis_fair_caps;
  }
  return redis_caps;
}

// A node of a cluster: its pool and pipeline. A node that cannot be reached, or a connection to it
// that drops, makes the slot map be read again at the next lookup: a dead master never answers
// MOVED, and its slots are served by its promoted replica once the cluster has failed over. A drop
// also makes the held leases be checked, as on a single server.
std::shared_ptr<node> make_node(shared& s, const endpoint& where) {
  auto n = std::make_shared<node>();
  auto open = [raw = &s](const endpoint& at, std::error_code& ec) {
    auto c = connection::open(at, ec);
    if (c) {
      raw->cluster->reachable(at);
    } else {
      raw->cluster->unreachable(at);
    }
    return c;
  };
  n->connections = std::make_shared<pool>(where, s.config.pool_size, std::move(open));
  n->requests = std::make_unique<pipeline>(n->connections);
  n->connections->on_server_change([raw = &s] {
    raw->cluster->mark_stale();
    raw->check_held_soon();
  });
  return n;
}

// redis:// (or a Sentinel scheme) at a cluster node would work for the names whose slot that node
// serves and fail for the others: refused at open, naming the scheme that fits.
void refuse_cluster_node(connection& c, const shared& s) {
  std::error_code ec;
  auto r = c.command({"INFO", "cluster"}, ec);
  if (ec || r->type != REDIS_REPLY_STRING) return;  // an old server without the section is no cluster
  if (std::string_view(r->str, r->len).find("cluster_enabled:1") == std::string_view::npos) return;
  throw error(errc::backend_error,
              "redis " + server_label(s) +
                  ": the server is a Redis Cluster node, which serves only some slots: use redis+cluster://" +
                  c.where().label() + " (any nodes of the cluster, comma-separated) with the same options");
}

// pubsub=auto: sharded when the cluster's nodes know SPUBLISH (Redis 7), as Redisson's default
// (ShardedSubscriptionMode.AUTO) chooses; a Redisson service on the same names must choose alike.
bool uses_sharded_pubsub(shared& s, const uri& u) {
  using choice = settings::pubsub_choice;
  if (s.config.pubsub == choice::classic) return false;
  std::error_code ec;
  const auto masters = s.cluster->known();
  auto c = masters.empty() ? pool::handle{} : masters.front()->connections->checkout(ec);
  if (!c) throw error(ec, last_error_message());
  auto r = c->command({"COMMAND", "INFO", "SPUBLISH"}, ec);
  if (ec) throw error(ec, last_error_message());
  const bool known = r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY;
  if (!known && s.config.pubsub == choice::sharded)
    throw error(errc::backend_error, "redis " + u.redacted() +
                                         ": pubsub=sharded, but the cluster's nodes do not know SPUBLISH (Redis 7 "
                                         "or later has it); use pubsub=auto or classic");
  return known;
}

}  // namespace

redis_backend::redis_backend(const uri& u, const lock_options& defaults, mode m)
    : backend(declared_caps(m, u.scheme()), redis_primitives, lock_scope::network, name_limits{4096}, defaults,
              u.redacted()) {
  auto s = std::make_shared<shared>();
  s->config = parse_settings(u, m);
  std::error_code ec;
  if (!s->config.cluster_seeds.empty()) {
    s->cluster = std::make_unique<cluster_map>(
        s->config.cluster_seeds, [raw = s.get()](const endpoint& where) { return make_node(*raw, where); });
    // Read the slot map now, so a wrong password, no reachable node or a server that is no cluster
    // fails at open.
    s->cluster->refresh(ec);
    if (ec) throw error(ec, last_error_message());
    s->config.sharded_pubsub = uses_sharded_pubsub(*s, u);
  } else {
    opener open;
    if (s->config.sentinel) {
      s->sentinels = std::make_shared<sentinel_watch>(*s->config.sentinel);
      open = [w = s->sentinels](const endpoint& where, std::error_code& ec) { return w->open_master(where, ec); };
    }
    s->single = std::make_shared<node>();
    s->single->connections = std::make_shared<pool>(s->config.where, s->config.pool_size, std::move(open));
    s->single->requests = std::make_unique<pipeline>(s->single->connections);
    s->single->connections->on_server_change([raw = s.get()] { raw->check_held_soon(); });
    // Connect now, so a wrong password, an unreachable host or a non-Redis server fails at open.
    auto probe = s->single->connections->checkout(ec);
    if (ec) throw error(ec, last_error_message());
    refuse_cluster_node(*probe, *s);
  }
  s->renewals = std::make_unique<pipelined_renewals<redis_lease>>(*s);
  s->primitive_renewals = make_grant_renewals(*s);
  if (s->sentinels) s->sentinels->follow([raw = s.get()] { raw->master_moved(); });
  shared_ = std::move(s);
}

void require_one_slot(const shared& s, std::string_view name, std::initializer_list<std::string_view> keys) {
  if (!s.cluster || keys.size() == 0) return;
  const auto slot = key_slot(*keys.begin());
  for (const auto k : keys) {
    if (k.empty() || key_slot(k) == slot) continue;
    throw error(errc::invalid_name,
                "redis+cluster: the keys of '" + std::string(name) + "' fall in different slots ('" +
                    std::string(*keys.begin()) + "' in slot " + std::to_string(slot) + ", '" + std::string(k) +
                    "' in slot " + std::to_string(key_slot(k)) +
                    "), and a cluster runs one script only on keys of one slot; a prefix must end in the name's "
                    "hash tag, or the name must carry one (like '{" +
                    std::string(name) + "}')");
  }
}

std::unique_ptr<distributed_lock> redis_backend::do_make_lock(std::string name, lock_options options) {
  const auto k = keys_for(shared_->config.prefix, shared_->config.lock_mode, name);
  require_one_slot(*shared_, name, {k.key, k.fence, k.channel, k.queue, k.timeout, k.waiting, k.permits, k.rw_channel});
  return std::make_unique<redis_lock>(shared_, std::move(name), caps(), std::move(options));
}

std::unique_ptr<rw_lock> redis_backend::do_make_rw_lock(std::string name, lock_options options) {
  return make_redis_rw_lock(shared_, name, rw_caps(), std::move(options));
}

std::unique_ptr<semaphore> redis_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                            lock_options options) {
  return make_redis_semaphore(shared_, name, max_count, semaphore_caps(), std::move(options));
}

}  // namespace dlock::redis
