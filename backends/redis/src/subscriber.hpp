#pragma once
// The one pub/sub connection of a backend, shared by every waiting lock (thousands of waiters,
// one connection). A dedicated thread owns the hiredis context and poll()s its socket together
// with a wake-up pipe, so other threads can add or drop subscriptions without touching hiredis.
// After a dropped connection the thread reconnects, subscribes again and wakes every waiter
// (waiters also bound each wait by the holder's PTTL, so a lost message costs at most that).
// The connection is watched even with no subscription, so a dropped server is noticed at once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "connection.hpp"

namespace dlock::redis {

class channel_state {
 public:
  std::uint64_t generation() const;
  // Returns when a message arrived after `seen` (true) or at `until` (false).
  bool wait(std::uint64_t seen, std::chrono::steady_clock::time_point until) const;

 private:
  friend class subscriber;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t generation_ = 0;
  bool confirmed_ = false;
  std::size_t users_ = 0;
  void bump();
};

class subscriber {
 public:
  // `on_drop` runs on the subscriber's thread each time its connection is lost (server stopped,
  // restarted, connection killed); it must not block.
  explicit subscriber(endpoint where, std::function<void()> on_drop = {});
  ~subscriber();
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  // Subscribes (shared with other waiters of the same channel) and returns once the server has
  // confirmed the subscription, so a release published afterwards is never missed.
  std::shared_ptr<channel_state> subscribe(const std::string& channel, std::error_code& ec) noexcept;
  void unsubscribe(const std::string& channel) noexcept;

 private:
  void run();
  void wake() noexcept;
  bool connect_and_resubscribe();
  void dispatch(redisReply* r);

  endpoint where_;
  std::function<void()> on_drop_;
  bool had_connection_ = false;  // only the thread touches it
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<channel_state>, std::less<>> channels_;
  std::vector<std::string> to_subscribe_, to_unsubscribe_;
  bool stopping_ = false;
  int wake_pipe_[2] = {-1, -1};
  std::unique_ptr<connection> conn_;  // only the thread touches it
  std::thread thread_;
};

}  // namespace dlock::redis
