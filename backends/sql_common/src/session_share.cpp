// Shared sessions and the local key guard (session_share.hpp).
#include "dlock_sql/session_share.hpp"

#include <algorithm>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock_sql/deadline.hpp"

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
    std::shared_ptr<session> chosen;
    std::unique_lock<dlock::detail::timed_mutex> chosen_lk;
    bool open_new = false;
    std::shared_ptr<session> least;
    {
      std::lock_guard lk(m_);
      std::erase_if(sessions_, [](const auto& s) { return s->ended(); });
      // A session nobody is using and nobody holds a lock on; else, while there is room, a new
      // one (no statement waits behind another lease's while there is room); else any session
      // nobody is using; else the least held one (its statements are short).
      for (int pass = 0; pass < 2 && !chosen; ++pass) {
        if (pass == 1 && sessions_.size() + opening_ < max_sessions_) {
          open_new = true;
          ++opening_;
          break;
        }
        const std::size_t n = sessions_.size();
        for (std::size_t i = 0; i < n && !chosen; ++i) {
          auto& s = sessions_[(next_ + i) % n];
          if (pass == 0 && s->holders.load() > 0) continue;
          std::unique_lock slk(s->mutex(), std::try_to_lock);
          if (slk.owns_lock()) {
            chosen = s;
            chosen_lk = std::move(slk);
          }
        }
      }
      ++next_;
      if (!chosen && !open_new)
        for (auto& s : sessions_)
          if (!least || s->holders.load() < least->holders.load()) least = s;
    }
    if (chosen) {
      if (live(*chosen)) return {std::move(chosen), std::move(chosen_lk)};
      continue;  // ended now: dropped at the next pass
    }
    if (open_new) {
      std::error_code pool_ec;
      bool others = false;
      {
        std::lock_guard lk(m_);
        others = !sessions_.empty();
      }
      auto h = connections_->checkout_dedicated(others ? std::chrono::steady_clock::now() : deadline, pool_ec);
      std::shared_ptr<session> s;
      try {
        if (h) s = std::make_shared<session>(std::move(h));
      } catch (...) {
        set_error(ec, errc::backend_error, "out of memory");
      }
      std::unique_lock share_lk(m_);
      --opening_;
      if (s) {
        s->keep_for_sharing();
        std::unique_lock lk(s->mutex());
        try {
          sessions_.push_back(s);
        } catch (...) {  // not shared then: used by this caller alone
        }
        opened_.notify_all();
        return {std::move(s), std::move(lk)};
      }
      if (ec) return {};
      if (!others) {
        ec = pool_ec;
        return {};
      }
      continue;
    }
    if (least) {
      // Behind another lease's statement on it, at most until the caller's deadline (deadline.hpp).
      std::unique_lock lk(least->mutex(), std::defer_lock);
      const auto until = std::min(deadline, io_deadline());
      if (until == std::chrono::steady_clock::time_point::max())
        lk.lock();
      else if (!lk.try_lock_until(until)) {
        set_error(ec, errc::backend_unavailable,
                  "every shared session stayed busy with another statement until the deadline");
        return {};
      }
      if (live(*least)) return {std::move(least), std::move(lk)};
      continue;
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

void session_share::give_back_idle() noexcept {
  std::lock_guard lk(m_);
  for (auto& s : sessions_) {
    std::unique_lock slk(s->mutex(), std::try_to_lock);
    if (slk.owns_lock() && s->holders.load() == 0) s->give_back();
  }
}

bool session_share::reserve(const std::string& key, time_point deadline) noexcept {
  try {
    std::unique_lock lk(keys_m_);
    const auto free = [&] { return !keys_.contains(key); };
    if (!spi::wait_until(key_freed_, lk, deadline, free)) return false;  // the deadline, or a stop request
    keys_[key].exclusive = 1;
    return true;
  } catch (...) {
    return false;
  }
}

session_share::beside session_share::reserve_beside(const std::string& key, bool shared) noexcept {
  try {
    std::lock_guard lk(keys_m_);
    auto [it, inserted] = keys_.try_emplace(key);
    ++(shared ? it->second.shared : it->second.exclusive);
    return inserted ? beside::alone : beside::others;
  } catch (...) {
    return beside::failed;
  }
}

bool session_share::reserved(const std::string& key) noexcept {
  std::lock_guard lk(keys_m_);
  return keys_.contains(key);
}

void session_share::unreserve(const std::string& key, bool shared) noexcept {
  {
    std::lock_guard lk(keys_m_);
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    auto& count = shared ? it->second.shared : it->second.exclusive;
    if (count > 0) --count;
    if (it->second.shared == 0 && it->second.exclusive == 0) keys_.erase(it);
  }
  key_freed_.notify_all();
}

}  // namespace dlock::sql
