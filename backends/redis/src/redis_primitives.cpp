#include "redis_primitives.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <vector>

#include "dlock/acquire_stop.hpp"
#include "name_conflict.hpp"
#include "redis_keys.hpp"
#include "renewal.hpp"
#include "script_call.hpp"
#include "shared_scripts.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One grant of a reader-writer lock (a read or a write hold) or of a semaphore (its permits):
// released and renewed by the scripts given at the grant. Renewal calls put the ttl first.
class grant_lease final : public spi::lease_state {
 public:
  grant_lease(std::shared_ptr<backend_state> s, std::string name, milliseconds ttl, clock::time_point start,
              std::uint64_t fencing, script_call release, script_call renew)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        state_(std::move(s)),
        fencing_(fencing),
        release_(std::move(release)),
        renew_(std::move(renew)) {}

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fencing_; }
  spi::renewal_batch* batch() const noexcept override { return state_->primitive_renewals.get(); }

  // The renewal script's arguments for `ttl_text` (ARGV[1]) and its answer, for the batch too.
  std::vector<std::string_view> renew_args(const std::string& ttl_text) const {
    std::vector<std::string_view> args{ttl_text};
    args.insert(args.end(), renew_.args.begin(), renew_.args.end());
    return args;
  }
  void judge_renewal(const redisReply& r, std::error_code& ec) const { judge_renewal_reply(r, "'" + name() + "'", ec); }
  void judge_replicas(const redisReply* wait_reply, std::error_code& ec) const {
    judge_renewal_replicas(*state_, wait_reply, "'" + name() + "'", ec);
  }
  renewal_request renewal(const std::string& ttl_text) const {
    return {renew_.s, renew_.key_views(), renew_args(ttl_text)};
  }
  // As a mutex lease: wait for a pooled connection while the grant is valid, at least connect_timeout.
  clock::time_point connection_deadline() const noexcept {
    return std::max(valid_until(), clock::now() + state_->config.where.connect_timeout);
  }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    reply_ptr r;
    try {
      auto out = state_->eval(*release_.s, release_.key_views(), release_.arg_views(), connection_deadline(),
                              milliseconds::zero(), ec);
      if (out.withdrawn) set_busy_error(ec, "releasing");
      r = std::move(out.reply);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory releasing");
      return;
    }
    if (ec) return;
    if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {
      set_error(ec, errc::backend_error, "redis: releasing '" + name() + "': " + std::string(error_text(r.get())));
    } else if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
      set_error(ec, errc::not_owner,
                "redis: '" + name() +
                    "' was no longer ours at release (it expired or was deleted, and may be held "
                    "by someone else now); the work done under it was not protected");
    }
  }

  void do_renew(milliseconds ttl, std::error_code& ec) noexcept override {
    renew_alone(*state_, *this, ttl, ec, [&](std::error_code& e) { set_busy_error(e, "renewing"); });
  }

 private:
  void set_busy_error(std::error_code& ec, std::string_view doing) const {
    set_error(ec, errc::backend_unavailable,
              "redis " + server_label(*state_) + ": " + std::string(doing) + " '" + name() +
                  "': not sent: every pooled connection (pool_size) stayed busy until the grant's validity ran out");
  }

  std::shared_ptr<backend_state> state_;
  std::uint64_t fencing_;
  script_call release_, renew_;
};

// What an acquire script answered.
struct answer {
  bool granted = false;
  std::uint64_t token = 0;
  milliseconds wait_hint{-1};  // a miss: how long until it may change (<= 0: no idea)
  bool quiet = false;          // a miss: the holder publishes nothing on release (a redis-py Lock)
};

// What the name is asked for, for the conflict's message: "a reader-writer lock", "a semaphore".
struct request_kind {
  std::string_view wanted;
  std::string_view name;
  std::string_view key;  // the name's raw key (prefix + name)
};

// One acquire script call through the pipeline. nullopt with ec: an error. nullopt without ec:
// withdrawn before it was sent (the deadline passed in the queue) or a young server (wait_hint).
// The acquire's reply was lost on a connection still intact (command_timeout): the server may
// grant after all, to nobody. Read the late reply in the background and, if it is a grant, send
// its release on the same connection, so it runs after the grant. (On a broken connection
// nothing can be read: such a grant runs out at its ttl.)
void undo_late_grant(backend_state& s, std::shared_ptr<late_replies> late, std::size_t index, script_call undo,
                     clock::time_point expires_at) noexcept {
  try {
    s.post([&s, late = std::move(late), index, undo = std::move(undo), expires_at](std::stop_token stop) {
      constexpr milliseconds slice{100};  // so a stopping backend is not held up
      auto outcome = late->take(index, slice, stop, expires_at);
      const auto* r = outcome.get();
      if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != -1)
        return;
      (void)late->with_connection([&](connection& c) {
        std::error_code ec;
        (void)c.eval_source(as_published(s.config, *undo.s), undo.key_views(), undo.arg_views(), ec);
      });
    });
  } catch (...) {
    // out of memory: the grant, if any, runs out at its ttl
  }
}

bool is_grant(const redisReply* r) noexcept {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
         r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == -1;
}

// A grant that must not count (min_replicas not confirmed, or WAIT's reply lost): its release at
// once, else in the background until it would have expired anyway. Its reply was read, so it has
// run: a release on any connection comes after it.
void give_back(backend_state& s, script_call undo, clock::time_point expires_at) noexcept {
  try {
    std::error_code ec;
    auto out = s.eval(*undo.s, undo.key_views(), undo.arg_views(), clock::now() + s.config.where.connect_timeout,
                      milliseconds::zero(), ec);
    if (!ec && !out.withdrawn) return;
    s.post([&s, undo = std::move(undo), expires_at](std::stop_token stop) {
      for (auto pause = milliseconds(50); !stop.stop_requested() && clock::now() < expires_at;
           pause = std::min(pause * 2, milliseconds(1000))) {
        std::error_code ec;
        if (auto c = s.checkout_for(undo.keys.front(), ec); !ec) {
          (void)c->eval(as_published(s.config, *undo.s), undo.key_views(), undo.arg_views(), ec);
          if (!ec) return;
        }
        background_thread::pause(stop, pause);
      }
    });
  } catch (...) {
    // out of memory: the grant runs out at its ttl
  }
}

// `make_undo()`: the release of the grant this call may make, for undo_late_grant.
template <class MakeUndo>
std::optional<answer> run_acquire(backend_state& s, std::string_view what, request_kind kind, const script& acquire,
                                  const std::vector<std::string_view>& keys, const std::vector<std::string_view>& args,
                                  milliseconds ttl, std::optional<clock::time_point> deadline, std::uint32_t max_count,
                                  milliseconds& young, std::error_code& ec, MakeUndo&& make_undo) noexcept {
  try {
    const auto& cfg = s.config;
    const auto start = clock::now();
    // As the mutex: with wait_after_restart nothing is granted by a server younger than a ttl.
    const auto min_age = cfg.wait_after_restart ? ttl : milliseconds::zero();
    // With min_replicas, WAIT follows the script on its connection, as for the mutex (replication.hpp).
    auto out = s.eval(acquire, keys, args, deadline.value_or(start + cfg.where.connect_timeout), min_age, ec, false,
                      replica_wait(cfg));
    if (out.withdrawn) {
      if (!deadline)
        set_error(
            ec, errc::backend_unavailable,
            "redis " + server_label(s) + ": " + std::string(what) +
                ": not sent: every pooled connection (pool_size) stayed busy for connect_timeout; raise pool_size");
      return std::nullopt;
    }
    if (out.server_young > milliseconds::zero()) {
      young = out.server_young;
      s.note_young_server(out.run_id, out.server_young, ttl);
      return std::nullopt;
    }
    if (ec) {
      if (out.reply) {  // the grant's reply came, WAIT's did not: a grant nobody may count
        if (is_grant(out.reply.get())) give_back(s, make_undo(), start + ttl);
      } else if (out.late) {
        undo_late_grant(s, std::move(out.late), out.late_index, make_undo(), start + ttl);
      }
      return std::nullopt;
    }
    const auto* r = out.reply.get();
    if (is_name_conflict(r)) {
      set_name_conflict(ec, kind.name, kind.key, *r, kind.wanted);
      return std::nullopt;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
      set_error(ec, errc::backend_error,
                "redis: " + std::string(what) + ": unexpected reply " + std::string(error_text(r)) +
                    (is_error(r, "WRONGTYPE") ? " (the key holds something else: another client's data)" : ""));
      return std::nullopt;
    }
    const auto first = r->element[0]->integer, second = r->element[1]->integer;
    if (first == -2) {
      // Not necessarily a wrong max_count here: a client that keeps its permits in the count alone
      // (Redisson's RSemaphore) makes the held permits invisible, so the total looks short.
      set_error(ec, errc::name_conflict,
                "redis: " + std::string(what) + ": the server's semaphore has " + std::to_string(second) +
                    " permits (available + held: the count key '" + std::string(kind.key) +
                    "' plus the permits recorded in '" + redisson_suffix_name(kind.key, "timeout") +
                    "'), not max_count " + std::to_string(max_count) +
                    ": either another process uses this name with another max_count (every process must use "
                    "the same max_count for a name), or a client that records no permits (Redisson's plain "
                    "RSemaphore) holds some of them");
      return std::nullopt;
    }
    if (first == -1 && cfg.replicas.wanted() && replication::confirmed(out.trailer.get()) < cfg.replicas.min_replicas) {
      give_back(s, make_undo(), start + ttl);
      cfg.replicas.set_short_error(ec, server_label(s), std::string(what) + " was granted", out.trailer.get(),
                                   "released it: a grant counts only once min_replicas replicas have it");
      return std::nullopt;
    }
    if (first == -1) return answer{true, static_cast<std::uint64_t>(second), {}};
    const bool quiet = r->elements >= 3 && r->element[2]->type == REDIS_REPLY_INTEGER && r->element[2]->integer == 1;
    return answer{false, 0, milliseconds(first), quiet};
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
    return std::nullopt;
  }
}

// What a try that was not granted learnt: how long until it may change (the holder's PTTL, the
// next permit's expiry, a young server's wait; <= 0: no idea) and whether a release message can
// come at all (not from a redis-py Lock holding the name as a mutex).
struct miss {
  milliseconds hint{};
  bool quiet = false;
};

// Whether run_acquire's answer `got` is no grant; if so, `m` says what the try learnt: with no
// answer, `young` (a young server's wait, else 0), else the answer's hint.
bool missed(const std::optional<answer>& got, milliseconds young, miss& m) noexcept {
  if (got && got->granted) return false;
  m = got ? miss{got->wait_hint, got->quiet} : miss{young, false};
  return true;
}

// Notified waiting, as the mutex's: try; on a miss subscribe to the release channel, then try
// again (a release between the miss and the subscription is not lost), and wait for a message or
// the hint (the holder's PTTL, the next permit's expiry; poll.max without one, and at most poll.max
// when no message will come), and try again.
// `attempt(ec, miss, deadline)` is one try; `poll` the core's polling wait, used when no
// subscription can be made; `longest_wait` bounds each wait (a waiting writer's entry must be
// renewed by its tries before it expires).
template <class Attempt, class Poll>
std::unique_ptr<spi::lease_state> wait_for_grant(backend_state& s, const std::string& channel, wake_rule rule,
                                                 clock::time_point deadline, milliseconds poll_max,
                                                 milliseconds longest_wait, std::error_code& ec, Attempt&& attempt,
                                                 Poll&& poll) noexcept {
  miss last;
  auto got = attempt(ec, last, deadline);
  if (got || ec) return got;
  auto sub = s.subscriber_for_waits();
  auto state = sub ? sub->subscribe(channel, ec, rule) : nullptr;
  if (!state) {
    ec.clear();
    if (spi::stop_requested()) return nullptr;  // the subscription was given up at the stop
    return poll();  // no subscriber connection: the core's jittered polling rather than fail
  }
  struct unsubscribe_at_exit {
    subscriber& s;
    const std::string& channel;
    ~unsubscribe_at_exit() { s.unsubscribe(channel); }
  } guard{*sub, channel};
  channel_waiter place(state);
  for (;;) {
    if (spi::stop_requested()) {
      place.pass_on();  // a wake-up it holds is the next waiter's (see redis_lock's wait)
      return nullptr;
    }
    got = attempt(ec, last, deadline);
    if (got) return got;
    if (ec) {
      place.pass_on();
      return nullptr;
    }
    const auto now = clock::now();
    if (now >= deadline || spi::stop_requested()) return nullptr;
    auto bound = std::min(last.hint > milliseconds::zero() ? last.hint + milliseconds(1) : poll_max, longest_wait);
    if (last.quiet) bound = std::min(bound, poll_max);
    place.wait(deadline - now > bound ? now + bound : deadline);
  }
}

class redis_rw_lock final : public rw_lock {
 public:
  redis_rw_lock(std::shared_ptr<backend_state> s, const std::string& name, capabilities caps, lock_options options)
      : rw_lock(name, caps, std::move(options)), state_(std::move(s)) {
    const auto key = state_->config.prefix + name;
    field_ = redisson_owner_field(state_->config, owner());
    write_field_ = field_ + ":write";
    keys_ = rw_keys_for(key, field_);
  }

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    miss m;
    return attempt(side, ec, m, std::nullopt);
  }

  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    // A write release publishes '1' (every waiting reader may go), a read release '0' (the lock
    // is free): either may let several of this process's waiters in, so both wake them all.
    std::string entry;  // this wait's entry in the waiting writers' set
    if (side == access::write) {
      try {
        entry = write_field_ + ":" + spi::random_token();
      } catch (...) {
        set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
        return nullptr;
      }
    }
    const auto& waiting = side == access::write ? entry : no_entry_;
    // A waiting writer's entry expires a ttl after its last try: it tries again at least thrice a ttl.
    const auto longest_wait =
        side == access::write ? std::max(options().ttl / 3, milliseconds(1)) : milliseconds::max();
    bool polled = false;  // no subscription: the core's polling, whose tries leave no entry
    auto got = wait_for_grant(
        *state_, keys_.channel, wake_rule::all, deadline, options().poll.max, longest_wait, ec,
        [&](std::error_code& e, miss& m, clock::time_point d) { return attempt(side, e, m, d, waiting); },
        [&] {
          polled = true;
          return rw_lock::do_acquire_until(side, deadline, ec);
        });
    // The entry our tries left: taken out by a grant they made, otherwise here.
    if (side == access::write && (!got || polled)) give_up(entry);
    return got;
  }

 private:
  // A waiting writer that leaves without the lock takes its entry out of the waiting set (when
  // this fails, the entry expires a ttl after its last try).
  void give_up(const std::string& entry) noexcept {
    try {
      std::error_code ec;
      (void)state_->eval(scripts::rw_writer_gives_up, {keys_.waiting, keys_.hash, keys_.channel}, {entry},
                         clock::now() + state_->config.where.connect_timeout, milliseconds::zero(), ec);
    } catch (...) {
    }
  }

  std::unique_ptr<spi::lease_state> attempt(access side, std::error_code& ec, miss& m,
                                            std::optional<clock::time_point> deadline,
                                            const std::string& waiting_entry = {}) noexcept {
    try {
      const auto ttl = options().ttl;
      const auto ttl_text = ms_text(ttl);
      const bool read = side == access::read;
      const auto start = clock::now();
      milliseconds young{};
      const auto what = std::string(read ? "read-locking '" : "write-locking '") + std::string(name()) + "'";
      const request_kind kind{"a reader-writer lock", name(), keys_.hash};
      const auto got =
          read ? run_acquire(*state_, what, kind, scripts::rw_read_acquire,
                             {keys_.hash, keys_.timeout_prefix, keys_.token, keys_.waiting, keys_.permits},
                             {ttl_text, field_}, ttl, deadline, 0, young, ec, [&] { return read_release(); })
               : run_acquire(*state_, what, kind, scripts::rw_write_acquire,
                             {keys_.hash, keys_.token, keys_.waiting, keys_.permits},
                             {ttl_text, write_field_, waiting_entry}, ttl, deadline, 0, young, ec,
                             [&] { return write_release(ttl_text); });
      if (missed(got, young, m)) return nullptr;
      if (read)
        return std::make_unique<grant_lease>(
            state_, std::string(name()), ttl, start, got->token, read_release(),
            script_call{&scripts::rw_read_renew, {keys_.hash, keys_.timeout_prefix}, {field_}});
      return std::make_unique<grant_lease>(state_, std::string(name()), ttl, start, got->token, write_release(ttl_text),
                                           script_call{&scripts::rw_write_renew, {keys_.hash}, {write_field_}});
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
  }

  script_call read_release() const {
    return {
        &scripts::rw_read_release,
        {keys_.hash, keys_.channel, keys_.timeout_prefix, keys_.holders_prefix, keys_.mutex_channel, keys_.mutex_queue},
        {field_}};
  }
  script_call write_release(const std::string& ttl_text) const {
    return {&scripts::rw_write_release,
            {keys_.hash, keys_.channel, keys_.mutex_channel, keys_.mutex_queue},
            {write_field_, ttl_text}};
  }

  const std::string no_entry_;
  std::shared_ptr<backend_state> state_;
  std::string field_, write_field_;
  rw_key_names keys_;
};

class redis_semaphore final : public semaphore {
 public:
  redis_semaphore(std::shared_ptr<backend_state> s, const std::string& name, std::uint32_t max_count, capabilities caps,
                  lock_options options)
      : semaphore(name, max_count, caps, std::move(options)),
        state_(std::move(s)),
        keys_(semaphore_keys_for(state_->config.prefix + name)),
        max_count_text_(std::to_string(max_count)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    miss m;
    return attempt(permits, ec, m, std::nullopt);
  }

  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_for_grant(
        *state_, keys_.channel, wake_rule::published_count, deadline, options().poll.max, milliseconds::max(), ec,
        [&](std::error_code& e, miss& m, clock::time_point d) { return attempt(permits, e, m, d); },
        [&] { return semaphore::do_acquire_until(permits, deadline, ec); });
  }

 private:
  // Permit ids of 16 bytes, as Redisson's: 12 random bytes shared by the lease's permits and the
  // permit's index, big-endian.
  static std::vector<std::string> permit_ids(std::uint32_t permits) {
    const auto hex = spi::random_token();
    std::string base(16, '\0');
    for (std::size_t i = 0; i < 16; ++i) base[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    std::vector<std::string> ids(permits, base);
    for (std::uint32_t i = 0; i < permits; ++i)
      for (int b = 0; b < 4; ++b) ids[i][12 + b] = static_cast<char>((i >> (8 * (3 - b))) & 0xff);
    return ids;
  }

  std::unique_ptr<spi::lease_state> attempt(std::uint32_t permits, std::error_code& ec, miss& m,
                                            std::optional<clock::time_point> deadline) noexcept {
    try {
      const auto ttl = options().ttl;
      const auto ttl_text = ms_text(ttl);
      const auto permits_text = std::to_string(permits);
      auto ids = permit_ids(permits);
      std::vector<std::string_view> args{ttl_text, max_count_text_, permits_text};
      args.insert(args.end(), ids.begin(), ids.end());
      const auto start = clock::now();
      milliseconds young{};
      const auto got = run_acquire(*state_, "acquiring semaphore '" + std::string(name()) + "'",
                                   request_kind{"a semaphore", name(), keys_.count}, scripts::semaphore_acquire,
                                   {keys_.count, keys_.timeouts, keys_.channel, keys_.token}, args, ttl, deadline,
                                   max_count(), young, ec, [&] { return release_of(ids); });
      if (missed(got, young, m)) return nullptr;
      auto release = release_of(ids);
      return std::make_unique<grant_lease>(state_, std::string(name()), ttl, start, got->token, std::move(release),
                                           script_call{&scripts::semaphore_renew, {keys_.timeouts}, std::move(ids)});
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory acquiring");
      return nullptr;
    }
  }

  script_call release_of(const std::vector<std::string>& ids) const {
    return {&scripts::semaphore_release, {keys_.count, keys_.timeouts, keys_.channel}, ids};
  }

  std::shared_ptr<backend_state> state_;
  semaphore_key_names keys_;
  std::string max_count_text_;
};

}  // namespace

// The watchdog's renewals of many reader-writer and semaphore leases of one backend: one pipeline
// on one connection (renewal.hpp), as the mutex's.
std::unique_ptr<spi::renewal_batch> make_grant_renewals(backend_state& s) {
  return std::make_unique<pipelined_renewals<grant_lease>>(s);
}

std::unique_ptr<rw_lock> make_redis_rw_lock(std::shared_ptr<backend_state> s, const std::string& name,
                                            capabilities caps, lock_options options) {
  const auto k = rw_keys_for(s->config.prefix + name, "field");
  require_one_slot(*s, name,
                   {k.hash, k.channel, k.token, k.timeout_prefix, k.holders_prefix, k.waiting, k.permits,
                    k.mutex_channel, k.mutex_queue});
  return std::make_unique<redis_rw_lock>(std::move(s), name, caps, std::move(options));
}

std::unique_ptr<semaphore> make_redis_semaphore(std::shared_ptr<backend_state> s, const std::string& name,
                                                std::uint32_t max_count, capabilities caps, lock_options options) {
  const auto k = semaphore_keys_for(s->config.prefix + name);
  require_one_slot(*s, name, {k.count, k.timeouts, k.channel, k.token});
  return std::make_unique<redis_semaphore>(std::move(s), name, max_count, caps, std::move(options));
}

}  // namespace dlock::redis
