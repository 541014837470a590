#include "redis_lock.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "cluster.hpp"
#include "dlock/acquire_stop.hpp"
#include "name_conflict.hpp"
#include "redis_keys.hpp"
#include "redis_lease.hpp"
#include "replication.hpp"
#include "scripts.hpp"
#include "shared_scripts.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How a script is sent: EVALSHA (cached; NOSCRIPT falls back to EVAL), or always as source when
// the request must run although its reply may never be read.
enum class sending { cached, source };

reply_ptr run(connection& c, sending how, const script& s, const std::vector<std::string_view>& keys,
              const std::vector<std::string_view>& args, std::error_code& ec) {
  return how == sending::cached ? c.eval(s, keys, args, ec) : c.eval_source(s, keys, args, ec);
}

// release_call on a connection of one's own (the background clean-ups).
reply_ptr release_grant(connection& c, const settings& cfg, const std::string& name, const std::string& key,
                        const std::string& owner, milliseconds ttl, std::error_code& ec,
                        sending how = sending::cached) {
  const auto call = release_call(cfg, name, key, owner, ttl);
  return run(c, how, as_published(cfg, *call.s), call.key_views(), call.arg_views(), ec);
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

class redis_lock final : public distributed_lock {
 public:
  redis_lock(std::shared_ptr<backend_state> s, const std::string& name, capabilities caps, lock_options options)
      : distributed_lock(name, caps, std::move(options)), state_(std::move(s)) {
    const auto& cfg = state_->config;
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

  // Simple mode (the redis-py layout) takes a whole set in one script, on a cluster when every key
  // of the set shares a slot. The other layouts, and a set the script cannot take (a member's name
  // in use by a semaphore, a key holding something else), go member by member, whose errors say
  // which member and why.
  std::vector<std::unique_ptr<spi::lease_state>> do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                    std::error_code& ec) noexcept override {
    std::vector<std::unique_ptr<spi::lease_state>> granted;
    try {
      const auto& cfg = state_->config;
      std::vector<redis_lock*> members;
      for (auto* l : set) {
        auto* m = dynamic_cast<redis_lock*>(l);
        if (m == nullptr || m->state_ != state_ || m->options().ttl != options().ttl) return not_in_one_step(ec);
        members.push_back(m);
      }
      if (cfg.lock_mode != mode::simple) return not_in_one_step(ec);
      const auto ttl = options().ttl;
      const auto ttl_text = ms_text(ttl);
      std::vector<std::string> secrets;
      std::vector<std::string_view> keys, args{ttl_text};
      secrets.reserve(members.size());
      for (auto* m : members) {
        if (state_->cluster && key_slot(m->key_) != key_slot(key_)) return not_in_one_step(ec);
        secrets.push_back("dlock:" + spi::random_token());
        keys.insert(keys.end(), {m->key_, m->fence_key_, m->waiting_key_, m->permits_key_});
      }
      for (const auto& secret : secrets) args.emplace_back(secret);
      const auto start = clock::now();
      const auto min_age = cfg.wait_after_restart ? ttl : milliseconds::zero();
      auto out = state_->eval(scripts::simple_acquire_set, keys, args, start + cfg.where.connect_timeout, min_age, ec,
                              false, replica_wait(cfg));
      if (out.withdrawn) return not_in_one_step(ec);
      if (out.server_young > milliseconds::zero()) {  // held by someone else until then, as for one lock
        state_->note_young_server(out.run_id, out.server_young, ttl);
        return granted;
      }
      const auto whole_set_granted = [&](const redisReply* r) {
        return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == members.size() + 1 &&
               granted_by(r, mode::simple).value_or(false);
      };
      if (ec) {
        if (out.reply) {
          if (whole_set_granted(out.reply.get()))
            for (std::size_t i = 0; i < members.size(); ++i) members[i]->give_back(secrets[i], start + ttl);
        } else if (out.late) {
          std::vector<undo_target> undo;
          for (std::size_t i = 0; i < members.size(); ++i)
            undo.push_back({std::string(members[i]->name()), members[i]->key_, secrets[i]});
          undo_unanswered(std::move(out.late), out.late_index, std::move(undo), false, start + ttl);
        }
        return granted;
      }
      const auto* r = out.reply.get();
      if (!whole_set_granted(r)) {
        if (granted_by(r, mode::simple) == std::optional<bool>(false) && r->element[0]->integer == 0) return granted;
        return not_in_one_step(ec);  // a conflict or a foreign key: the members' own tries report it
      }
      if (cfg.replicas.wanted() && replication::confirmed(out.trailer.get()) < cfg.replicas.min_replicas) {
        for (std::size_t i = 0; i < members.size(); ++i) members[i]->give_back(secrets[i], start + ttl);
        cfg.replicas.set_short_error(
            ec, server_label(*state_), "a set of " + std::to_string(members.size()) + " locks was granted",
            out.trailer.get(), "released it: a grant counts only once min_replicas replicas have it");
        return granted;
      }
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (r->element[i + 1]->type != REDIS_REPLY_INTEGER) return not_in_one_step(ec);
      }
      for (std::size_t i = 0; i < members.size(); ++i)
        granted.push_back(std::make_unique<redis_lease>(state_, std::string(members[i]->name()), members[i]->key_,
                                                        std::move(secrets[i]), ttl, start,
                                                        static_cast<std::uint64_t>(r->element[i + 1]->integer)));
      return granted;
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring a set of locks");
      granted.clear();
      return granted;
    }
  }

 private:
  static std::vector<std::unique_ptr<spi::lease_state>> not_in_one_step(std::error_code& ec) {
    ec = make_error_code(errc::not_supported);
    return {};
  }

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
    const bool fair = state_->config.lock_mode == mode::fair;
    auto sub = state_->subscriber_for_waits();
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
                   (state_->config.lock_mode == mode::reentrant && state_->holds(key_, field_));
    if (!channel) {
      auto got = attempt(ec, held, false, deadline, entry);
      if (got || ec) return got;
      if (sub) channel = sub->subscribe(channel_, ec);
      if (!channel) {
        ec.clear();
        if (spi::stop_requested()) return nullptr;  // the subscription was given up at the stop
        // No subscriber connection: fall back to the core's jittered polling rather than fail.
        held.polled = true;
        return distributed_lock::do_acquire_until(deadline, ec);
      }
      guard.s = sub.get();
      place.emplace(channel);
      try_now = true;  // the try above preceded the subscription
    }
    for (;;) {
      if (try_now && !spi::stop_requested()) {
        auto got = attempt(ec, held, fair, deadline, entry);
        if (got) return got;
        if (ec) {
          place->pass_on();
          if (fair) leave_queue();
          return nullptr;
        }
      } else if (spi::stop_requested()) {
        // Stopped between a wake-up and its retry: the release it stood for is the next waiter's,
        // who would otherwise sleep until its PTTL bound.
        place->pass_on();
      }
      try_now = true;
      const auto now = clock::now();
      if (now >= deadline || spi::stop_requested()) {  // a stop leaves as the deadline does
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
      (void)state_->eval(scripts::rw_writer_gives_up, {waiting_key_, key_, rw_channel_}, {entry},
                         clock::now() + state_->config.where.connect_timeout, milliseconds::zero(), ec);
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
      const auto& cfg = state_->config;
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
      auto out = state_->eval(*s, keys, args, deadline.value_or(start + cfg.where.connect_timeout), min_age, ec, false,
                              replica_wait(cfg));
      if (out.withdrawn) {
        if (!deadline) set_withdrawn_error(ec, *state_, "acquiring lock '" + std::string(name()) + "'");
        held.pttl = milliseconds::zero();
        held.quiet = false;
        return nullptr;
      }
      if (out.server_young > milliseconds::zero()) {
        // "held by someone else" until then: waiters wait, try_acquire says no
        held.pttl = out.server_young;
        held.quiet = false;
        state_->note_young_server(out.run_id, out.server_young, ttl);
        return nullptr;
      }
      if (ec) {
        if (out.reply) {  // the grant's reply came, WAIT's did not: a grant nobody may count
          if (granted_by(out.reply.get(), cfg.lock_mode).value_or(false)) give_back(secret, start + ttl);
        } else if (out.late) {
          undo_unanswered(std::move(out.late), out.late_index, {{std::string(name()), key_, std::move(secret)}},
                          enqueue, start + ttl);
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
            ec, server_label(*state_),
            "lock '" + std::string(name()) + "' was granted (fencing token " + std::to_string(token) + ")",
            out.trailer.get(), "released it: a grant counts only once min_replicas replicas have it");
        return nullptr;
      }
      return std::make_unique<redis_lease>(state_, std::string(name()), key_, std::move(secret), ttl, start, token);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
  }

  // One grant an unanswered request may have made: the lock's name and key, and its token.
  struct undo_target {
    std::string name, key, owner;
  };

  // The acquire request went out but its reply was lost (command_timeout, dropped connection):
  // the server may have granted the lock (or a whole set: `grants`) to nobody, and it would stay
  // taken for a ttl. Undo it in the background. On an intact connection (a timeout) the undo goes
  // after the request on the same connection (`late`, shared with the rest of its batch), so it
  // runs after the grant, whenever the server gets to it; on a broken connection the request has
  // run or never will, and the token's compare-and-delete is exact.
  void undo_unanswered(std::shared_ptr<late_replies> late, std::size_t index, std::vector<undo_target> grants,
                       bool enqueued, clock::time_point expires_at) noexcept {
    try {
      auto task = [s = state_.get(), late = std::move(late), index, grants = std::move(grants), queue = queue_key_,
                   timeout = timeout_key_, enqueued, expires_at, ttl = options().ttl](std::stop_token stop) mutable {
        const auto& cfg = s->config;
        constexpr milliseconds slice{100};  // so a stopping backend is not held up
        if (auto outcome = late->take(index, slice, stop, expires_at)) {
          // Once sent, the undo runs even if its own reply is lost: it follows on this connection.
          const bool sent = late->with_connection([&](connection& c) {
            std::error_code ec;
            if (granted_by(outcome.get(), cfg.lock_mode).value_or(false)) {
              for (const auto& g : grants)
                (void)release_grant(c, cfg, g.name, g.key, g.owner, ttl, ec, sending::source);
            } else if (cfg.lock_mode == mode::fair && enqueued) {
              const auto& g = grants.front();
              (void)c.eval_source(scripts::fair_cancel,
                                  {queue, timeout, g.key, redisson_prefix_name("redisson_lock__channel", g.key)},
                                  {g.owner, ms_text(cfg.fair_wait), publish_command(cfg)}, ec);
            }
          });
          if (sent || !granted_by(outcome.get(), cfg.lock_mode).value_or(false)) return;
        }
        late.reset();                               // lets the dead connection go (dropped) before opening another
        if (cfg.lock_mode != mode::simple) return;  // a Redisson owner field's count cannot tell: it expires
        for (auto pause = milliseconds(50); !grants.empty() && !stop.stop_requested() && clock::now() < expires_at;
             pause = std::min(pause * 2, milliseconds(1000))) {
          std::erase_if(grants, [&](const undo_target& g) {
            std::error_code ec;
            if (auto fresh = s->checkout_for(g.key, ec); !ec)
              (void)release_grant(*fresh, cfg, g.name, g.key, g.owner, ttl, ec);
            return !ec;
          });
          if (!grants.empty()) background_thread::pause(stop, pause);
        }
      };
      state_->post(std::move(task));
    } catch (...) {
      // out of memory: the grant, if any, expires at its ttl as before
    }
  }

  // A grant that must not count (too few replicas confirmed it, or WAIT's reply was lost): given
  // back at once, else in the background until it would have expired anyway. The grant's reply
  // was read, so it has run: a release on any connection comes after it.
  void give_back(const std::string& owner, clock::time_point expires_at) noexcept {
    try {
      const auto& cfg = state_->config;
      const auto call = release_call(cfg, std::string(name()), key_, owner, options().ttl);
      std::error_code ec;
      auto out = state_->eval(*call.s, call.key_views(), call.arg_views(), clock::now() + cfg.where.connect_timeout,
                              milliseconds::zero(), ec);
      if (!ec && !out.withdrawn) return;
      state_->post([s = state_.get(), call, expires_at](std::stop_token stop) {
        for (auto pause = milliseconds(50); !stop.stop_requested() && clock::now() < expires_at;
             pause = std::min(pause * 2, milliseconds(1000))) {
          std::error_code ec;
          if (auto fresh = s->checkout_for(call.keys.front(), ec); !ec) {
            (void)fresh->eval(as_published(s->config, *call.s), call.key_views(), call.arg_views(), ec);
            if (!ec) return;
          }
          background_thread::pause(stop, pause);
        }
      });
    } catch (...) {
      // out of memory: the grant expires at its ttl
    }
  }

  // Redisson's acquireFailed: a waiter that gives up leaves the queue.
  void leave_queue() noexcept {
    std::error_code ec;
    auto c = state_->checkout_for(key_, ec);
    if (ec) return;  // its queue entry times out after fair_wait, as a crashed Java waiter's does
    try {
      (void)c->eval(scripts::fair_cancel,
                    {queue_key_, timeout_key_, key_, redisson_prefix_name("redisson_lock__channel", key_)},
                    {field_, ms_text(state_->config.fair_wait), publish_command(state_->config)}, ec);
    } catch (...) {
    }
  }

  std::shared_ptr<backend_state> state_;
  std::string key_, fence_key_, channel_, field_, queue_key_, timeout_key_, waiting_key_, permits_key_, rw_channel_;
};

}  // namespace

std::unique_ptr<distributed_lock> make_redis_lock(std::shared_ptr<backend_state> s, const std::string& name,
                                                  capabilities caps, lock_options options) {
  const auto k = keys_for(s->config.prefix, s->config.lock_mode, name);
  require_one_slot(*s, name, {k.key, k.fence, k.channel, k.queue, k.timeout, k.waiting, k.permits, k.rw_channel});
  return std::make_unique<redis_lock>(std::move(s), name, caps, std::move(options));
}

}  // namespace dlock::redis
