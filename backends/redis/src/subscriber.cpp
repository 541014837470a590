#include "subscriber.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <utility>

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

void channel_state::wake_all() {
  std::lock_guard lock(mutex_);
  wake_all_locked();
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
  me.woken_cv.wait_until(lock, until, [&] { return me.woken; });
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

subscriber::subscriber(endpoint where, std::function<void()> on_drop, opener open)
    : where_(std::move(where)), on_drop_(std::move(on_drop)), open_(std::move(open)) {
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
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
    if (!state->confirmed_cv_.wait_for(lock, where_.connect_timeout + where_.command_timeout,
                                  [&] { return state->confirmed_; })) {
      lock.unlock();
      unsubscribe(channel);
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

bool subscriber::connect_and_resubscribe() {
  std::error_code ec;
  conn_ = open_ ? open_(where_, ec) : connection::open(where_, ec);
  if (!conn_) return false;
  // Reads block only when poll() said so; a zero timeout would make hiredis non-blocking.
  timeval forever{0, 0};
  redisSetTimeout(conn_->raw(), forever);
  std::lock_guard lock(mutex_);
  to_subscribe_.clear();
  for (auto& [name, state] : channels_) {
    std::lock_guard state_lock(state->mutex_);
    state->confirmed_ = false;
    if (state->users_ > 0) to_subscribe_.push_back(name);
  }
  return true;
}

void subscriber::dispatch(redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
  const std::string_view kind(r->element[0]->str, r->element[0]->len);
  const std::string_view channel(r->element[1]->str, r->element[1]->len);
  std::shared_ptr<channel_state> state;
  {
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    state = it->second;
    if (kind == "unsubscribe") {
      std::lock_guard state_lock(state->mutex_);
      if (state->users_ == 0) {
        channels_.erase(it);
        return;
      }
    }
  }
  if (kind == "subscribe") {
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
      if (std::exchange(reconnect_, false) && conn_) conn_->discard();
    }
    if (!conn_ || conn_->broken()) {
      conn_.reset();
      if (had_connection_ && on_drop_) on_drop_();
      had_connection_ = false;
      // Waiters fall back to their PTTL-bounded waits; wake them so none sleeps on a dead channel.
      {
        std::lock_guard lock(mutex_);
        for (auto& [name, state] : channels_) state->wake_all();
      }
      had_connection_ = connect_and_resubscribe();
      if (!had_connection_) {
        pollfd p{wake_pipe_[0], POLLIN, 0};
        ::poll(&p, 1, 200);
        char buf[64];
        while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
        }
        continue;
      }
    }
    std::vector<std::string> subs, unsubs;
    {
      std::lock_guard lock(mutex_);
      subs.swap(to_subscribe_);
      for (auto& ch : to_unsubscribe_) {
        auto it = channels_.find(ch);
        if (it != channels_.end() && it->second->users_ == 0) unsubs.push_back(ch);
      }
      to_unsubscribe_.clear();
    }
    bool wrote = false;
    for (auto& ch : subs) wrote |= conn_->append({"SUBSCRIBE", ch});
    for (auto& ch : unsubs) wrote |= conn_->append({"UNSUBSCRIBE", ch});
    if (wrote && !conn_->flush()) continue;

    pollfd fds[2] = {{conn_->raw()->fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) {
      char buf[64];
      while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[0].revents != 0) {
      if (redisBufferRead(conn_->raw()) != REDIS_OK) {
        std::error_code ignored;
        conn_.reset();
        continue;
      }
      for (;;) {
        void* raw_reply = nullptr;
        if (redisGetReplyFromReader(conn_->raw(), &raw_reply) != REDIS_OK) {
          conn_.reset();
          break;
        }
        if (raw_reply == nullptr) break;
        reply_ptr r(static_cast<redisReply*>(raw_reply));
        dispatch(r.get());
      }
    }
  }
}

}  // namespace dlock::redis
