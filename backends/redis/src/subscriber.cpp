#include "subscriber.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::redis {

bool channel_state::has_waiters() const {
  std::lock_guard lock(mutex_);
  return !parked_.empty() || retrying_ > 0;
}

void channel_state::wake_one_locked() {
  if (!parked_.empty()) {
    auto oldest = parked_.begin();
    oldest->second->woken = true;
    ++retrying_;
    // Notified under the mutex: the waiter's `parked` lives on its stack until it sees `woken`.
    oldest->second->woken_cv.notify_one();
    parked_.erase(oldest);
  } else if (kept_ < users_) {
    // Every waiter is between two tries: the next one to park retries at once instead. More kept
    // wake-ups than waiters would only cost retries: each waiter's next try is after this release.
    ++kept_;
  }
}

void channel_state::on_message_locked(std::string_view payload) {
  switch (rule_) {
    case wake_rule::one: wake_one_locked(); return;
    case wake_rule::all: wake_all_locked(); return;
    case wake_rule::published_count: {
      // The permits now free: wake that many (at least one, so an unreadable message still wakes).
      std::size_t n = 0;
      const auto [ptr, err] = std::from_chars(payload.data(), payload.data() + payload.size(), n);
      if (err != std::errc() || n == 0) n = 1;
      n = std::min(n, parked_.size() + users_);  // more only adds kept wake-ups, capped at users_
      for (std::size_t i = 0; i < n; ++i) wake_one_locked();
      return;
    }
  }
}

void channel_state::wake_all_locked() {
  for (auto& [ticket, waiter] : parked_) {
    waiter->woken = true;
    ++retrying_;
    waiter->woken_cv.notify_one();
  }
  parked_.clear();
  kept_ = users_;
}

channel_waiter::channel_waiter(std::shared_ptr<channel_state> state) : state_(std::move(state)) {
  std::lock_guard lock(state_->mutex_);
  ticket_ = state_->next_ticket_++;
}

channel_waiter::~channel_waiter() {
  std::lock_guard lock(state_->mutex_);
  drop_wake_locked();
}

void channel_waiter::drop_wake_locked() {
  if (!holds_wake_) return;
  holds_wake_ = false;
  --state_->retrying_;
}

bool channel_waiter::wait(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(state_->mutex_);
  drop_wake_locked();  // its retry is done: it failed, or it would not be waiting again
  if (state_->kept_ > 0) {
    --state_->kept_;
    holds_wake_ = true;
    ++state_->retrying_;
    return true;
  }
  channel_state::parked me;
  state_->parked_.emplace(ticket_, &me);
  (void)spi::wait_until(me.woken_cv, lock, until, [&] { return me.woken; });  // or a stop request
  if (!me.woken) {
    state_->parked_.erase(ticket_);
    return false;
  }
  holds_wake_ = true;  // the waker counted it in retrying_
  return true;
}

void channel_waiter::pass_on() {
  std::lock_guard lock(state_->mutex_);
  if (!holds_wake_) return;
  drop_wake_locked();
  state_->wake_one_locked();
}

subscriber::subscriber(endpoint where, std::function<void()> on_drop, opener open, std::optional<shard_routing> shards)
    : where_(std::move(where)), on_drop_(std::move(on_drop)), open_(std::move(open)), shards_(std::move(shards)) {
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  thread_ = std::thread([this] { run(); });
}

subscriber::~subscriber() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void subscriber::wake() noexcept {
  const char b = 1;
  [[maybe_unused]] auto n = ::write(wake_pipe_[1], &b, 1);
}

std::shared_ptr<channel_state> subscriber::subscribe(const std::string& channel, std::error_code& ec,
                                                     wake_rule rule) noexcept {
  try {
    std::shared_ptr<channel_state> state;
    {
      std::lock_guard lock(mutex_);
      auto& slot = channels_[channel];
      if (!slot) {
        slot = std::make_shared<channel_state>();
        slot->rule_ = rule;
      }
      state = slot;
      std::lock_guard state_lock(state->mutex_);
      if (state->users_++ == 0) {
        // An UNSUBSCRIBE may be on its way: only the confirmation of this SUBSCRIBE counts.
        state->confirmed_ = false;
        to_subscribe_.push_back(channel);
      }
    }
    wake();
    std::unique_lock lock(state->mutex_);
    // Also ended by the acquire's stop request: the subscriber's connect is not the caller's to
    // cut short, but its wait for it is.
    const auto give_up_at = std::chrono::steady_clock::now() + where_.connect_timeout + where_.command_timeout;
    if (!spi::wait_until(state->confirmed_cv_, lock, give_up_at, [&] { return state->confirmed_; })) {
      lock.unlock();
      unsubscribe(channel);
      if (spi::stop_requested())
        set_error(ec, errc::backend_unavailable, "redis " + where_.label() + ": SUBSCRIBE abandoned at a stop request");
      else
        set_error(ec, errc::backend_unavailable,
                  "redis " + where_.label() + ": SUBSCRIBE was not confirmed in time (subscriber connection down?)");
      return nullptr;
    }
    return state;
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory subscribing");
    return nullptr;
  }
}

std::shared_ptr<channel_state> subscriber::join_subscribed(const std::string& channel) noexcept {
  std::lock_guard lock(mutex_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return nullptr;
  std::lock_guard state_lock(it->second->mutex_);
  if (it->second->users_ == 0 || !it->second->confirmed_) return nullptr;
  ++it->second->users_;
  return it->second;
}

void subscriber::unsubscribe(const std::string& channel) noexcept {
  try {
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    auto& state = *it->second;
    std::lock_guard state_lock(state.mutex_);
    state.kept_ = std::min(state.kept_, --state.users_);
    if (state.users_ == 0) to_unsubscribe_.push_back(channel);
  } catch (...) {
  }
  wake();
}

void subscriber::reconnect() noexcept {
  {
    std::lock_guard lock(mutex_);
    reconnect_ = true;
  }
  wake();
}

void subscriber::watch(const endpoint& where) noexcept {
  try {
    const auto label = where.label();
    {
      std::lock_guard lock(mutex_);
      if (!watched_.insert(label).second) return;
      to_watch_.push_back(where);
    }
    wake();
  } catch (...) {
    // out of memory: the master's death is noticed at the next renewal
  }
}

// Under mutex_.
void subscriber::resubscribe_locked(const std::string& channel, channel_state& state) {
  std::lock_guard state_lock(state.mutex_);
  state.confirmed_ = false;  // join_subscribed waits for the new subscription
  state.wake_all_locked();   // a release may have been published while it was not subscribed
  if (state.users_ > 0 && std::find(to_subscribe_.begin(), to_subscribe_.end(), channel) == to_subscribe_.end())
    to_subscribe_.push_back(channel);
}

void subscriber::resubscribe_all_at(const std::string& label) {
  std::lock_guard lock(mutex_);
  for (auto it = subscribed_at_.begin(); it != subscribed_at_.end();) {
    if (it->second != label) {
      ++it;
      continue;
    }
    if (auto ch = channels_.find(it->first); ch != channels_.end()) resubscribe_locked(it->first, *ch->second);
    it = subscribed_at_.erase(it);
  }
}

subscriber::link* subscriber::link_for(const std::string& label, const endpoint& where) {
  auto& l = links_[label];
  if (l.conn) return &l;
  std::error_code ec;
  l.conn = shards_ || !open_ ? connection::open(where, ec) : open_(where, ec);
  if (!l.conn) {
    links_.erase(label);
    return nullptr;
  }
  // Reads block only when poll() said so; a zero timeout would make hiredis non-blocking.
  timeval forever{0, 0};
  redisSetTimeout(l.conn->raw(), forever);
  return &l;
}

bool subscriber::send_subscriptions() {
  std::vector<std::string> subs, unsubs;
  std::vector<endpoint> watches;
  {
    std::lock_guard lock(mutex_);
    watches.swap(to_watch_);
    for (auto& ch : to_subscribe_) {
      auto it = channels_.find(ch);
      if (it == channels_.end()) continue;
      std::lock_guard state_lock(it->second->mutex_);
      if (it->second->users_ > 0) subs.push_back(std::move(ch));
    }
    to_subscribe_.clear();
    for (auto& ch : to_unsubscribe_) {
      auto it = channels_.find(ch);
      if (it != channels_.end() && it->second->users_ == 0) unsubs.push_back(ch);
    }
    to_unsubscribe_.clear();
  }
  for (const auto& where : watches) {
    if (link_for(where.label(), where)) continue;
    std::lock_guard lock(mutex_);  // not reachable now: a later watch() may try again
    watched_.erase(where.label());
  }
  const char* subscribe_command = shards_ ? "SSUBSCRIBE" : "SUBSCRIBE";
  const char* unsubscribe_command = shards_ ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
  std::vector<std::string> retry;
  std::vector<link*> written;
  for (auto& ch : subs) {
    std::string label;
    endpoint where = where_;
    if (shards_) {
      const auto at = shards_->route(ch);
      if (!at) {
        retry.push_back(std::move(ch));
        continue;
      }
      where = *at;
      label = where.label();
    }
    auto* l = link_for(label, where);
    if (!l) {
      retry.push_back(std::move(ch));
      continue;
    }
    if (l->conn->append({subscribe_command, ch})) {
      l->pending.push_back(ch);
      subscribed_at_[ch] = label;
      written.push_back(l);
    }
  }
  for (auto& ch : unsubs) {
    auto at = subscribed_at_.find(ch);
    if (shards_ && at == subscribed_at_.end()) continue;  // never subscribed anywhere
    const auto label = at == subscribed_at_.end() ? std::string() : at->second;
    auto l = links_.find(label);
    if (l == links_.end() || !l->second.conn) continue;
    if (l->second.conn->append({unsubscribe_command, ch})) {
      l->second.leaving.push_back(ch);
      written.push_back(&l->second);
    }
    if (at != subscribed_at_.end()) subscribed_at_.erase(at);
  }
  for (auto* l : written) (void)l->conn->flush();  // a failed flush breaks the link: handled next round
  if (retry.empty()) return true;
  std::lock_guard lock(mutex_);
  for (auto& ch : retry) to_subscribe_.push_back(std::move(ch));
  return false;
}

void subscriber::dispatch(redisReply* r, const std::string& label) {
  auto& l = links_[label];
  if (r->type == REDIS_REPLY_ERROR) {
    // Sharded: an SSUBSCRIBE refused, the oldest unconfirmed one (replies come in order): MOVED,
    // its slot is served elsewhere now. Subscribed again after the map is read again.
    if (!shards_ || l.pending.empty()) return;
    const auto channel = l.pending.front();
    l.pending.erase(l.pending.begin());
    subscribed_at_.erase(channel);
    if (shards_->moved) shards_->moved();
    std::lock_guard lock(mutex_);
    if (auto it = channels_.find(channel); it != channels_.end()) resubscribe_locked(channel, *it->second);
    return;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
  std::string_view kind(r->element[0]->str, r->element[0]->len);
  // Sharded pub/sub's replies are the same with an 's' in front (ssubscribe, smessage, sunsubscribe).
  if (shards_ && kind.starts_with('s')) kind.remove_prefix(1);
  const std::string_view channel(r->element[1]->str, r->element[1]->len);
  if (kind == "subscribe") {
    if (auto p = std::find(l.pending.begin(), l.pending.end(), channel); p != l.pending.end()) l.pending.erase(p);
  }
  bool requested = true;
  if (kind == "unsubscribe") {
    auto p = std::find(l.leaving.begin(), l.leaving.end(), channel);
    requested = p != l.leaving.end();
    if (requested) l.leaving.erase(p);
  }
  std::shared_ptr<channel_state> state;
  // A later SUBSCRIBE of the channel, or an UNSUBSCRIBE, is still to be answered: this answer is
  // an earlier subscription's (its waiter gave up), and an UNSUBSCRIBE may cut the channel off
  // before the later SUBSCRIBE makes it whole. Only the last one confirms it.
  bool superseded = false;
  {
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    state = it->second;
    if (kind == "subscribe") {
      const auto named = [&](const std::vector<std::string>& list) {
        return std::find(list.begin(), list.end(), channel) != list.end();
      };
      superseded = named(l.pending) || named(l.leaving) || named(to_subscribe_);
    }
    if (kind == "unsubscribe") {
      {
        std::lock_guard state_lock(state->mutex_);
        if (state->users_ == 0) {
          channels_.erase(it);
          return;
        }
      }
      // Sharded: the node dropped the channel unasked, which Redis does once the channel's slot
      // is no longer served there (migrated, or the node demoted): follow the slot.
      if (shards_ && !requested) {
        subscribed_at_.erase(std::string(channel));
        if (shards_->moved) shards_->moved();
        resubscribe_locked(std::string(channel), *state);
      }
      return;
    }
  }
  if (kind == "subscribe") {
    if (superseded) return;
    {
      std::lock_guard state_lock(state->mutex_);
      state->confirmed_ = true;
    }
    state->confirmed_cv_.notify_all();
  } else if (kind == "message") {
    std::lock_guard state_lock(state->mutex_);
    state->on_message_locked(std::string_view(r->element[2]->str, r->element[2]->len));
  }
}

void subscriber::run() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      if (std::exchange(reconnect_, false))
        for (auto& [label, l] : links_)
          if (l.conn) l.conn->discard();
    }
    bool complete = true;  // every wanted subscription was sent (else try again soon)
    if (!shards_) {
      auto& l = links_[""];
      if (!l.conn || l.conn->broken()) {
        links_.erase("");
        if (had_connection_ && on_drop_) on_drop_();
        had_connection_ = false;
        {
          // Waiters fall back to their PTTL-bounded waits; wake them so none sleeps on a dead channel.
          std::lock_guard lock(mutex_);
          to_subscribe_.clear();
          subscribed_at_.clear();
          for (auto& [name, state] : channels_) resubscribe_locked(name, *state);
        }
        had_connection_ = link_for("", where_) != nullptr;
        if (!had_connection_) complete = false;
      }
    }
    {
      // A master went away (stopped, failed over, connection killed): its channels follow their
      // slots, and a watch on it ends (the leases' next masters are watched as they are granted).
      std::vector<std::string> gone;
      for (auto& [label, l] : links_)
        if ((shards_ || !label.empty()) && (!l.conn || l.conn->broken())) gone.push_back(label);
      for (const auto& label : gone) {
        links_.erase(label);
        {
          std::lock_guard lock(mutex_);
          watched_.erase(label);
        }
        if (on_drop_) on_drop_();
        if (shards_ && shards_->moved) shards_->moved();
        resubscribe_all_at(label);
      }
    }
    if (complete) complete = send_subscriptions();

    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}};
    std::vector<std::string> labels;
    for (auto& [label, l] : links_) {
      if (!l.conn || l.conn->broken()) continue;
      fds.push_back({l.conn->raw()->fd, POLLIN, 0});
      labels.push_back(label);
    }
    if (::poll(fds.data(), fds.size(), complete ? -1 : 200) < 0) continue;
    if (fds[0].revents != 0) {
      char buf[64];
      while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto& l = links_[labels[i - 1]];
      if (redisBufferRead(l.conn->raw()) != REDIS_OK) {
        l.conn->discard();
        continue;
      }
      for (;;) {
        void* raw_reply = nullptr;
        if (redisGetReplyFromReader(l.conn->raw(), &raw_reply) != REDIS_OK) {
          l.conn->discard();
          break;
        }
        if (raw_reply == nullptr) break;
        reply_ptr r(static_cast<redisReply*>(raw_reply));
        dispatch(r.get(), labels[i - 1]);
      }
    }
  }
}

}  // namespace dlock::redis
