#include "pg_notifier.hpp"

#include <poll.h>

#include "dlock/acquire_stop.hpp"

namespace dlock::pg {

namespace {
std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}
}  // namespace

pg_notifier::pg_notifier(pg_settings settings, std::chrono::milliseconds connect_timeout, std::string channel)
    : settings_(std::move(settings)), connect_timeout_(connect_timeout), channel_(std::move(channel)) {}

pg_notifier::~pg_notifier() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

std::uint64_t pg_notifier::arm(const std::string& name) noexcept {
  std::lock_guard lk(m_);
  try {
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token st) { run(st); });
    auto& e = names_[hex(name)];
    ++e.waiters;
    return e.generation;
  } catch (...) {
    return 0;
  }
}

void pg_notifier::wait_for_release(const std::string& name, std::uint64_t armed_at,
                                   std::chrono::steady_clock::time_point deadline) noexcept {
  std::unique_lock lk(m_);
  try {
    const auto key = hex(name);
    auto it = names_.find(key);
    if (it == names_.end()) return;
    // Before the listener is up a notification could be missed: the caller's re-check bound
    // (deadline) covers that window.
    (void)spi::wait_until(cv_, lk, deadline, [&] { return it->second.generation != armed_at; });  // or a stop
    if (--it->second.waiters == 0) names_.erase(it);
  } catch (...) {
  }
}

void pg_notifier::disarm(const std::string& name) noexcept {
  std::lock_guard lk(m_);
  try {
    if (auto it = names_.find(hex(name)); it != names_.end() && --it->second.waiters == 0) names_.erase(it);
  } catch (...) {
  }
}

void pg_notifier::run(std::stop_token stop) noexcept {
  while (!stop.stop_requested()) {
    sql::sql_error err;
    auto conn = connect_raw(settings_, connect_timeout_, err);
    if (conn) {
      // The channel is "dlock_" + a validated identifier: quoting is exact.
      pgresult_ptr r(PQexec(conn.get(), ("LISTEN \"" + channel_ + "\"").c_str()));
      if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) conn.reset();
    }
    if (conn) {
      {
        std::lock_guard lk(m_);
        listening_ = true;
      }
      // Anything released while we were not listening: wake everyone to re-try once.
      cv_.notify_all();
      {
        std::lock_guard lk(m_);
        for (auto& [k, e] : names_) ++e.generation;
      }
      cv_.notify_all();
      while (!stop.stop_requested()) {
        pollfd fd{PQsocket(conn.get()), POLLIN, 0};
        const int n = ::poll(&fd, 1, 100);  // 100ms: only to notice stop requests
        if (n < 0) continue;
        if (n == 0) continue;
        if (!PQconsumeInput(conn.get()) || PQstatus(conn.get()) != CONNECTION_OK) break;
        bool any = false;
        while (PGnotify* note = PQnotifies(conn.get())) {
          std::lock_guard lk(m_);
          if (auto it = names_.find(std::string_view(note->extra)); it != names_.end()) {
            ++it->second.generation;
            any = true;
          }
          PQfreemem(note);
        }
        if (any) cv_.notify_all();
      }
      std::lock_guard lk(m_);
      listening_ = false;
    }
    // Lost or never connected: waiters fall back on their re-check bound; try again shortly.
    for (int i = 0; i < 10 && !stop.stop_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
}

}  // namespace dlock::pg
