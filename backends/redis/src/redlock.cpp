#include "redlock.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <stop_token>
#include <utility>

#include "capabilities.hpp"
#include "dlock/acquire_stop.hpp"
#include "script_call.hpp"
#include "scripts.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A master's connection whose request went out but whose reply was lost (its command_timeout).
struct unanswered_request {
  std::size_t master;
  pool::handle conn;
};

// What one master made of a request.
enum class master_answer {
  not_asked,  // unreachable, or younger than the ttl
  unknown,    // sent, but no answer came (it may have run)
  refused,    // answered, not `ok`
  ok,
};

// While alive, inside an acquire that can be stopped: its stop request shuts the reading side of
// the round's connections down, so that each read of a master that stays silent fails at once
// instead of after its command_timeout (one after another). Their requests' outcomes are then
// unknown, as after a timeout, and undone like them (undo_late_grants).
class round_stopper {
 public:
  explicit round_stopper(std::vector<int> fds) {
    if (spi::current_stop_token().stop_possible())
      on_stop_.emplace(spi::current_stop_token(), shut_down{std::move(fds), &fired_});
  }
  round_stopper(const round_stopper&) = delete;
  round_stopper& operator=(const round_stopper&) = delete;
  // Ends the watch: the callback has run to its end or never will. Whether it shut the sockets
  // down, which leaves even a connection whose answer was read unusable.
  bool stop_watching() noexcept {
    on_stop_.reset();
    return fired_.load(std::memory_order_acquire);
  }

 private:
  struct shut_down {
    std::vector<int> fds;
    std::atomic<bool>* fired;
    void operator()() const noexcept {
      for (const int fd : fds) ::shutdown(fd, SHUT_RD);
      fired->store(true, std::memory_order_release);
    }
  };
  std::atomic<bool> fired_{false};
  // Reset before the connections can close their sockets.
  std::optional<std::stop_callback<shut_down>> on_stop_;
};

// Sends `build(conn)` to every master first and reads the answers afterwards, so the round trips
// overlap (parallel, not one after another). Returns how many masters answered `ok(reply, i)`.
// With `late`, the connections whose reply was lost are handed over instead of dropped; with
// `answers`, each master's answer is written there.
// With `young_until_ttl`, a master that started less than that ttl ago (wait_after_restart) is
// asked nothing and counted in `young`: it may have restarted and forgotten a grant (antirez's
// delayed restart, done by the client).
template <class Build, class Ok>
std::size_t on_all(const redlock_state& s, Build build, Ok ok, std::string& failures,
                   std::vector<unanswered_request>* late = nullptr, std::size_t* young = nullptr,
                   milliseconds young_until_ttl = {}, std::vector<master_answer>* answers = nullptr) {
  if (answers) answers->assign(s.masters.size(), master_answer::not_asked);
  std::vector<pool::handle> conns(s.masters.size());
  std::vector<bool> sent(s.masters.size(), false);
  for (std::size_t i = 0; i < s.masters.size(); ++i) {
    // A stopped acquire's round (the one round that hands over `late`) asks no further master: a
    // connect begun now would run to its end. Releases and renewals ask every master.
    if (late && spi::stop_requested()) break;
    std::error_code ec;
    conns[i] = s.masters[i]->checkout(ec);
    if (ec) {
      failures += " " + s.masters[i]->where().label() + ": unavailable;";
      continue;
    }
    if (young && s.wait_after_restart && conns[i]->server_started_by() + young_until_ttl > clock::now()) {
      ++*young;
      continue;
    }
    sent[i] = build(*conns[i]) && conns[i]->flush();
    if (answers) (*answers)[i] = master_answer::unknown;  // a part of it may have gone out
    if (!sent[i]) failures += " " + s.masters[i]->where().label() + ": send failed;";
  }
  std::vector<int> fds;
  for (std::size_t i = 0; i < s.masters.size(); ++i)
    if (sent[i] && conns[i]->raw() != nullptr) fds.push_back(conns[i]->raw()->fd);
  round_stopper stopper(std::move(fds));
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.masters.size(); ++i) {
    if (!sent[i]) continue;
    std::error_code ec;
    auto r = conns[i]->read(ec);
    if (ec) {
      failures += " " + s.masters[i]->where().label() + ": no answer;";
      if (late && conns[i]->unanswered() > 0) late->push_back({i, std::move(conns[i])});
      continue;
    }
    if (answers) (*answers)[i] = master_answer::refused;
    if (is_error(r.get(), "NOSCRIPT")) {  // script cache lost on that master: run it plainly
      failures += " " + s.masters[i]->where().label() + ": NOSCRIPT;";
      continue;
    }
    if (ok(r.get(), i)) {
      ++count;
      if (answers) (*answers)[i] = master_answer::ok;
    }
  }
  if (stopper.stop_watching())
    for (auto& c : conns)
      if (c) c->discard();  // shut down: the pool drops it instead of lending it again
  return count;
}

class redlock_lease final : public spi::lease_state {
 public:
  redlock_lease(std::shared_ptr<redlock_state> s, std::string name, std::string key, std::string token,
                milliseconds ttl, clock::time_point start, const std::vector<master_answer>& grant)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        state_(std::move(s)),
        key_(std::move(key)),
        token_(std::move(token)),
        carried_our_key_(grant.size()) {
    for (std::size_t i = 0; i < grant.size(); ++i)
      carried_our_key_[i] = grant[i] == master_answer::ok || grant[i] == master_answer::unknown;
  }

  static void release_everywhere(const redlock_state& s, const std::string& key, const std::string& token,
                                 std::size_t& released) {
    std::string failures;
    const auto channel = key + ":redlock_channel";
    released = on_all(
        s,
        [&](connection& c) {
          return c.append({"EVAL", scripts::simple_release.source, "2", key, channel, token});
        },
        [](redisReply* r, std::size_t) { return r->type == REDIS_REPLY_INTEGER && r->integer == 1; }, failures);
  }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    try {
      std::size_t released = 0;
      release_everywhere(*state_, key_, token_, released);
      if (released < state_->quorum())
        set_error(ec, errc::not_owner,
                  "redlock: lock '" + name() + "' was ours on only " + std::to_string(released) + " of " +
                      std::to_string(state_->masters.size()) + " masters at release (expired or lost)");
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redlock: out of memory");
    }
  }

  // Renewed where the key is still ours, and set where it is absent. A master where it was set
  // counts toward the majority only if it never carried our key (a split vote gave it to another
  // client, or it did not answer the grant), while the lease is still valid and restarted masters
  // are waited out (wait_after_restart): then no other client can have held a majority since our
  // grant, since our unexpired keys sat on a majority, and a master that forgot them by
  // restarting is young, asked nothing by anyone. A master that lost our key (deleted, evicted)
  // may have served another client in between, so it never counts until the next renewal.
  void do_renew(milliseconds ttl, std::error_code& ec) noexcept override {
    try {
      std::string failures;
      const auto start = clock::now();
      const bool free_masters_count = state_->wait_after_restart && start < valid_until();
      const auto ttl_text = ms_text(ttl);
      std::size_t young = 0;
      std::vector<master_answer> answers;
      std::vector<bool> key_placed(state_->masters.size(), false);
      const auto n = on_all(
          *state_,
          [&](connection& c) {
            return c.append({"EVAL", scripts::redlock_renew.source, "1", key_, token_, ttl_text});
          },
          [&](redisReply* r, std::size_t i) {
            if (r->type != REDIS_REPLY_INTEGER || (r->integer != 1 && r->integer != 2)) return false;
            key_placed[i] = true;
            return r->integer == 1 || (free_masters_count && !carried_our_key_[i]);
          },
          failures, nullptr, &young, ttl, &answers);
      for (std::size_t i = 0; i < answers.size(); ++i)
        if (key_placed[i] || answers[i] == master_answer::unknown) carried_our_key_[i] = true;
      if (n >= state_->quorum() && validity_after(start, ttl) > clock::now()) return;
      // Lost. The keys still ours expire with the ttl just given, as they would had the holder
      // died: the holder is told at once, and the next client still waits for them.
      set_error(ec, errc::lock_lost,
                "redlock: lock '" + name() + "' renewed on only " + std::to_string(n) + " of " +
                    std::to_string(state_->masters.size()) + " masters" +
                    (young > 0 ? " (" + std::to_string(young) + " restarted less than a ttl ago)" : "") + ":" +
                    failures);
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redlock: out of memory");
    }
  }

 private:
  std::shared_ptr<redlock_state> state_;
  std::string key_, token_;
  // Per master: our key was set there, or may have been (a request whose answer was lost).
  std::vector<bool> carried_our_key_;
};

// A SET NX whose reply was lost may still run on that master and leave it locked for a ttl by
// nobody. Compare-and-delete by the token, in the background: on an intact connection after the
// late reply (so it runs after the SET, on the same connection), else on a fresh one, until the
// grant would have expired.
void undo_late_grants(redlock_state& s, std::vector<unanswered_request> late, const std::string& key,
                      const std::string& token, clock::time_point expires_at) {
  for (auto& request : late) {
    auto pending = std::make_shared<std::optional<pool::handle>>(std::move(request.conn));
    s.background.post([state = &s, pending, master = request.master, key, token, expires_at](std::stop_token stop) {
      const auto channel = key + ":redlock_channel";
      const std::vector<std::string_view> release{"EVAL", scripts::simple_release.source, "2", key, channel, token};
      auto& c = **pending;
      std::error_code ec;
      constexpr milliseconds slice{100};  // so a stopping backend is not held up
      if (c && c->resume_after_timeout(slice)) {
        while (!stop.stop_requested() && clock::now() < expires_at) {
          if (c->read(ec)) {
            c->set_read_timeout(c->where().command_timeout);
            (void)c->command(release, ec);  // once sent it runs, even if this reply is lost too
            return;
          }
          if (!c->resume_after_timeout(slice)) break;
        }
      }
      pending->reset();
      for (auto pause = milliseconds(50); !stop.stop_requested() && clock::now() < expires_at;
           pause = std::min(pause * 2, milliseconds(1000))) {
        ec.clear();
        if (auto fresh = state->masters[master]->checkout(ec); !ec) {
          (void)fresh->command(release, ec);
          if (!ec) return;
        }
        background_thread::pause(stop, pause);
      }
    });
  }
}

class redlock_lock final : public distributed_lock {
 public:
  redlock_lock(std::shared_ptr<redlock_state> s, const std::string& name, capabilities caps, lock_options options)
      : distributed_lock(name, caps, std::move(options)), state_(std::move(s)), key_(state_->prefix + name) {}

 protected:
  // One Redlock round: SET NX PX on every master in parallel; held with a majority and positive
  // validity; otherwise released everywhere. The core's jittered backoff is the random retry delay.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      const auto token = spi::random_token();
      const auto ttl = options().ttl;
      const auto ttl_text = ms_text(ttl);
      std::string failures;
      const auto start = clock::now();
      std::vector<unanswered_request> late;
      std::size_t young = 0;
      std::vector<master_answer> grant;
      const auto n = on_all(
          *state_,
          [&](connection& c) {
            return c.append({"SET", key_, token, "NX", "PX", ttl_text});
          },
          [](redisReply* r, std::size_t) { return r->type == REDIS_REPLY_STATUS; }, failures, &late, &young, ttl,
          &grant);
      const auto valid_until = spi::lease_state::validity_after(start, ttl);
      if (spi::stop_requested()) {
        // Stopped: the caller returns now. Whatever the round set, answered or not, is deleted by
        // its token in the background, on fresh connections, until it would have expired.
        std::vector<unanswered_request> asked;
        for (std::size_t i = 0; i < grant.size(); ++i)
          if (grant[i] != master_answer::not_asked) asked.push_back({i, pool::handle{}});
        undo_late_grants(*state_, std::move(asked), key_, token, start + ttl);
        return nullptr;
      }
      // Held: a late SET is part of this lease, and its release (by token, everywhere) covers it.
      if (n >= state_->quorum() && valid_until > clock::now())
        return std::make_unique<redlock_lease>(state_, std::string(name()), key_, token, ttl, start, grant);
      std::size_t ignored = 0;
      redlock_lease::release_everywhere(*state_, key_, token, ignored);
      undo_late_grants(*state_, std::move(late), key_, token, start + ttl);
      // Fewer masters answered than a majority: that is not contention but unavailability. (Young
      // masters answer; they only may not grant yet, which is waited out like contention.)
      const auto reachable =
          state_->masters.size() - static_cast<std::size_t>(std::count(failures.begin(), failures.end(), ';'));
      if (reachable < state_->quorum())
        set_error(ec, errc::backend_unavailable,
                  "redlock: only " + std::to_string(reachable) + " of " + std::to_string(state_->masters.size()) +
                      " masters reachable, a majority of " + std::to_string(state_->quorum()) + " is needed to lock '" +
                      std::string(name()) + "':" + failures);
      return nullptr;
    } catch (...) {
      set_error(ec, errc::backend_unavailable, "redlock: out of memory");
      return nullptr;
    }
  }

 private:
  std::shared_ptr<redlock_state> state_;
  std::string key_;
};

}  // namespace

redlock_backend::redlock_backend(const uri& u, const lock_options& defaults)
    : backend(redlock_caps, lock_scope::network, name_limits{4096}, defaults, u.redacted()) {
  if (u.hosts().size() < 3)
    throw error(errc::invalid_uri,
                "redlock: " + u.redacted() + ": expected at least 3 independent masters, h1:p1,h2:p2,h3:p3");
  auto s = std::make_shared<redlock_state>();
  s->prefix = u.get("prefix").value_or("");
  endpoint base;
  base.user = u.user();
  base.password = u.password();
  base.connect_timeout = u.get_duration("connect_timeout").value_or(std::chrono::milliseconds(200));
  // Redlock wants a per-master timeout small against the ttl, so a dead master costs little.
  base.command_timeout = u.get_duration("command_timeout").value_or(std::chrono::milliseconds(200));
  const auto pool_size = static_cast<std::size_t>(u.get_int("pool_size", 1, 1024).value_or(8));
  s->wait_after_restart = u.get_bool("wait_after_restart").value_or(true);
  base.learn_server_start = s->wait_after_restart;
  std::size_t up = 0;
  std::string failures;
  for (const auto& h : u.hosts()) {
    auto e = base;
    e.host = h.host;
    e.port = h.port_or(6379);
    s->masters.push_back(std::make_shared<pool>(e, pool_size));
    std::error_code ec;
    { auto probe = s->masters.back()->checkout(ec); }
    if (ec && ec == errc::authentication_failed) throw error(ec, last_error_message());
    if (!ec)
      ++up;
    else
      failures += " " + last_error_message() + ";";
  }
  if (up < s->quorum())
    throw error(errc::backend_unavailable, "redlock: " + u.redacted() + ": only " + std::to_string(up) +
                                               " masters reachable, a majority is needed:" + failures);
  state_ = std::move(s);
}

std::unique_ptr<distributed_lock> redlock_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<redlock_lock>(state_, std::move(name), caps(), std::move(options));
}

namespace {

std::string text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string(r->str, r->len)
                                                                               : std::string();
}

// What one master holds at a key: its value (empty: none) and PTTL.
struct master_value {
  std::string value;
  long long pttl = -2;
};

constexpr const char* read_key = "return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1])}";

// Asks every master through `ask(connection, ec)` (true: it answered), and throws
// backend_unavailable when fewer than a majority answered: fewer cannot tell who holds a key.
template <class Ask>
void ask_every_master(const redlock_state& st, Ask ask) {
  std::size_t answered = 0;
  std::string failures;
  for (const auto& m : st.masters) {
    std::error_code ec;
    auto c = m->checkout(ec);
    if (!c) {
      failures += " " + m->where().label() + ": unavailable;";
      continue;
    }
    if (!ask(*c, ec)) {
      failures += " " + m->where().label() + ": no answer;";
      continue;
    }
    ++answered;
  }
  if (answered < st.quorum())
    throw error(errc::backend_unavailable, "redlock: only " + std::to_string(answered) + " of " +
                                               std::to_string(st.masters.size()) +
                                               " masters answered, a majority is needed:" + failures);
}

}  // namespace

// Who holds `key`: the value a majority of the masters agree on (a Redlock grant's random token:
// no owner id is stored), with the least ttl left among them. Masters that do not answer hold
// nothing here; fewer answering than a majority cannot tell.
std::optional<lock_holder> redlock_backend::majority_holder(const std::string& key) const {
  std::vector<master_value> seen;
  ask_every_master(*state_, [&](connection& c, std::error_code& ec) {
    auto r = c.command({"EVAL", read_key, "1", key}, ec);
    if (ec || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return false;
    seen.push_back({text_of(r->element[0]), r->element[1]->integer});
    return true;
  });
  for (const auto& candidate : seen) {
    if (candidate.value.empty()) continue;
    lock_holder h;
    h.owner = candidate.value;
    std::size_t votes = 0;
    for (const auto& v : seen) {
      if (v.value != candidate.value) continue;
      ++votes;
      if (v.pttl >= 0 && (!h.ttl_left || std::chrono::milliseconds(v.pttl) < *h.ttl_left))
        h.ttl_left = std::chrono::milliseconds(v.pttl);
    }
    if (votes >= state_->quorum()) return h;
  }
  return std::nullopt;
}

lock_info redlock_backend::do_inspect(const std::string& name) {
  lock_info info;
  info.name = name;
  if (auto h = majority_holder(state_->prefix + name)) info.holders.push_back(std::move(*h));
  info.held = !info.holders.empty();
  return info;
}

// SCAN on every master; a name is held where a majority holds one value at its key.
std::vector<std::string> redlock_backend::do_list(const std::string& prefix) {
  std::string pattern;
  for (const char c : state_->prefix + prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += '*';
  std::map<std::pair<std::string, std::string>, std::size_t> votes;  // (key, value) -> masters
  ask_every_master(*state_, [&](connection& c, std::error_code& ec) {
    std::map<std::string, std::string> here;
    std::string cursor = "0";
    do {
      auto r = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, ec);
      if (ec || r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
      cursor = text_of(r->element[0]);
      for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
        const auto key = text_of(r->element[1]->element[i]);
        auto v = c.command({"GET", key}, ec);  // a key of another type answers an error: no value
        if (ec) break;
        if (v->type == REDIS_REPLY_STRING) here[key] = text_of(v.get());
      }
    } while (!ec && cursor != "0");
    if (ec) return false;
    for (auto& [key, value] : here) ++votes[{key, value}];
    return true;
  });
  std::vector<std::string> names;
  for (const auto& [kv, n] : votes)
    if (n >= state_->quorum()) names.push_back(kv.first.substr(state_->prefix.size()));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// Compare-and-delete of the majority's token on every master (the holder's release by token).
// The holder's release then finds its token on no majority (not_owner), and its renewal loses.
std::vector<lock_holder> redlock_backend::do_force_release(const std::string& name) {
  const auto key = state_->prefix + name;
  auto h = majority_holder(key);
  if (!h) return {};
  std::size_t released = 0;
  redlock_lease::release_everywhere(*state_, key, h->owner, released);
  return {std::move(*h)};
}

}  // namespace dlock::redis
