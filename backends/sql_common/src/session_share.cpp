// Shared sessions and the local key guard (session_share.hpp).
#include "dlock_sql/session_share.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::sql {

session_share::session_share(std::shared_ptr<pool> connections, std::size_t max_sessions)
    : connections_(std::move(connections)), max_sessions_(std::max<std::size_t>(max_sessions, 1)) {}

bool session_share::live(session& s) noexcept {
  auto* c = s.conn();
  if (c && c->usable() && c->poll_alive()) return true;
  s.end();  // closed by the server, or shut down by a lost lease: never used again
  return false;
}

session_share::picked session_share::pick(time_point deadline, std::error_code& ec) noexcept {
  for (;;) {
    std::vector<std::shared_ptr<session>> open;
    bool may_open = false;
    try {
      std::lock_guard lk(m_);
      std::erase_if(sessions_, [](const auto& w) {
        const auto s = w.lock();
        return !s || s->ended();
      });
      for (auto& w : sessions_)
        if (auto s = w.lock()) open.push_back(std::move(s));
      may_open = open.size() + opening_ < max_sessions_;
      if (may_open) ++opening_;
      if (!open.empty()) std::rotate(open.begin(), open.begin() + static_cast<std::ptrdiff_t>(next_++ % open.size()), open.end());
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return {};
    }
    // A session nobody is using right now.
    for (auto& s : open) {
      std::unique_lock lk(s->mutex(), std::try_to_lock);
      if (lk.owns_lock() && live(*s)) return {std::move(s), std::move(lk)};
    }
    // A new one while there is room: without waiting for the pool when others can be shared.
    if (may_open) {
      std::error_code pool_ec;
      auto h = connections_->checkout_dedicated(open.empty() ? deadline : std::chrono::steady_clock::now(), pool_ec);
      std::shared_ptr<session> s;
      try {
        if (h) s = std::make_shared<session>(std::move(h));
      } catch (...) {
        set_error(ec, errc::backend_error, "out of memory");
      }
      std::unique_lock share_lk(m_);
      --opening_;
      if (s) {
        std::unique_lock lk(s->mutex());
        try {
          sessions_.push_back(s);
        } catch (...) {  // not shared then: used by this caller alone
        }
        opened_.notify_all();
        return {std::move(s), std::move(lk)};
      }
      if (ec) return {};
      if (open.empty()) {
        ec = pool_ec;
        return {};
      }
    }
    // Every session busy and no room: queue on the least held one (its statements are short).
    std::shared_ptr<session> least;
    for (auto& s : open)
      if (!s->ended() && (!least || s->holders.load() < least->holders.load())) least = s;
    if (least) {
      std::unique_lock lk(least->mutex());
      if (live(*least)) return {std::move(least), std::move(lk)};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      set_error(ec, errc::backend_unavailable, "no live shared session and none could be opened");
      return {};
    }
    // Nothing to share yet (the sessions are still being opened by other callers): wait for one.
    std::unique_lock share_lk(m_);
    opened_.wait_until(share_lk, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds{10}));
  }
}

bool session_share::reserve(const std::string& key, time_point deadline) noexcept {
  try {
    std::unique_lock lk(keys_m_);
    const auto free = [&] { return !keys_.contains(key); };
    if (deadline == time_point::max())
      key_freed_.wait(lk, free);
    else if (!key_freed_.wait_until(lk, deadline, free))
      return false;
    keys_.insert(key);
    return true;
  } catch (...) {
    return false;
  }
}

void session_share::unreserve(const std::string& key) noexcept {
  {
    std::lock_guard lk(keys_m_);
    keys_.erase(key);
  }
  key_freed_.notify_all();
}

void free_key_when_lost::operator()() const noexcept {
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  reservation->reset();
}

}  // namespace dlock::sql
