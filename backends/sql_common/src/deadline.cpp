// The acquire's deadline on its thread, and the one thread per process that shuts down the sockets
// of statements still unanswered at their deadline (deadline.hpp).
#include "dlock_sql/deadline.hpp"

#include <sys/socket.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

namespace dlock::sql {
namespace {

// Armed sockets by the time they are due. Shutting one down happens under the mutex, so once
// disarm returns the fd is never touched again (its connection may close it and the number be
// reused at once).
class socket_cutter {
 public:
  // Never destroyed: a connect that a stopped acquire abandoned runs on its own thread (pool.cpp)
  // and may still arm the cutter while the process exits, after static destructors have run.
  static socket_cutter& instance() {
    static auto* const cutter = new socket_cutter;
    return *cutter;
  }
  ~socket_cutter() {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::uint64_t arm(int fd, steady_clock::time_point when) {
    std::lock_guard lk(m_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    const auto id = ++next_id_;
    const bool earliest = armed_.empty() || when < armed_.begin()->first;
    armed_.emplace(when, entry{fd, id});
    if (earliest) wake_.notify_all();
    return id;
  }
  // Moves an armed entry to `when` if that is sooner; false when `id` is not armed (fired).
  bool advance(std::uint64_t id, steady_clock::time_point when) noexcept {
    std::lock_guard lk(m_);
    for (auto it = armed_.begin(); it != armed_.end(); ++it) {
      if (it->second.id != id) continue;
      if (when < it->first) {
        const auto e = it->second;
        armed_.erase(it);
        const bool earliest = armed_.empty() || when < armed_.begin()->first;
        try {
          armed_.emplace(when, e);
        } catch (...) {  // out of memory: cut it now rather than never
          ::shutdown(e.fd, SHUT_RDWR);
          try {
            fired_.insert(e.id);
          } catch (...) {
          }
          return true;
        }
        if (earliest) wake_.notify_all();
      }
      return true;
    }
    return false;
  }
  // True when it had fired.
  bool disarm(std::uint64_t id) noexcept {
    std::lock_guard lk(m_);
    for (auto it = armed_.begin(); it != armed_.end(); ++it) {
      if (it->second.id == id) {
        armed_.erase(it);
        return false;
      }
    }
    return fired_.erase(id) > 0;
  }
  bool fired(std::uint64_t id) noexcept {
    std::lock_guard lk(m_);
    return fired_.contains(id);
  }

 private:
  struct entry {
    int fd;
    std::uint64_t id;
  };
  socket_cutter() = default;
  void loop() noexcept {
    std::unique_lock lk(m_);
    while (!stopping_) {
      if (armed_.empty()) {
        wake_.wait(lk);
        continue;
      }
      const auto due = armed_.begin()->first;
      if (steady_clock::now() < due) {
        wake_.wait_until(lk, due);
        continue;
      }
      const auto e = armed_.begin()->second;
      armed_.erase(armed_.begin());
      ::shutdown(e.fd, SHUT_RDWR);
      try {
        fired_.insert(e.id);
      } catch (...) {
      }
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::multimap<steady_clock::time_point, entry> armed_;
  std::set<std::uint64_t> fired_;  // fired and not yet disarmed
  std::uint64_t next_id_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

socket_guard::socket_guard(int fd) noexcept : fd_(fd) {
  const auto until = io_deadline();
  if (fd < 0 || until == steady_clock::time_point::max()) return;
  try {
    id_ = socket_cutter::instance().arm(fd, until);
  } catch (...) {
    id_ = 0;  // no thread: the statement is bounded by the connection's own timeouts only
  }
}

socket_guard::~socket_guard() { disarm(); }

bool socket_guard::disarm() noexcept {
  const auto id = id_.exchange(0);
  return id && socket_cutter::instance().disarm(id);
}

bool socket_guard::fired() const noexcept {
  const auto id = id_.load();
  return id && socket_cutter::instance().fired(id);
}

void socket_guard::cut_at(steady_clock::time_point when) noexcept {
  if (fd_ < 0) return;
  auto& cutter = socket_cutter::instance();
  if (const auto id = id_.load(); id && (cutter.advance(id, when) || cutter.fired(id))) return;
  try {
    id_ = cutter.arm(fd_, when);
  } catch (...) {  // no thread: the cancel request alone ends the statement
  }
}

namespace {
thread_local bool thread_statements_stoppable = false;
}

stoppable_statements::stoppable_statements() noexcept : previous_(thread_statements_stoppable) {
  thread_statements_stoppable = true;
}

stoppable_statements::~stoppable_statements() { thread_statements_stoppable = previous_; }

bool statements_stoppable() noexcept {
  return thread_statements_stoppable && spi::current_stop_token().stop_possible();
}

socket_stopper::socket_stopper(int fd) noexcept {
  if (fd >= 0 && statements_stoppable()) on_stop_.emplace(spi::current_stop_token(), shut_down{fd, &state_});
}

bool socket_stopper::disarm() noexcept {
  auto seen = watch_state::watching;
  state_.compare_exchange_strong(seen, watch_state::disarmed, std::memory_order_acq_rel);
  return seen == watch_state::fired;
}

void socket_stopper::shut_down::operator()() const noexcept {
  // Marked first: the statement's thread wakes on the shut socket and asks fired() at once, and a
  // stopped statement it took for a broken connection would be left waiting on the server. Only
  // while watching: once disarmed, the statement's answer has been trusted.
  auto seen = socket_stopper::watch_state::watching;
  if (state->compare_exchange_strong(seen, socket_stopper::watch_state::fired, std::memory_order_acq_rel))
    ::shutdown(fd, SHUT_RDWR);
}

}  // namespace dlock::sql
