#pragma once
// LISTEN/NOTIFY wake-ups for the table strategies: ONE listener connection per backend, shared by
// every waiting lock. Releases run pg_notify(channel, hex(name)) in the releasing statement, so a
// waiter wakes when the row is gone instead of sleeping out a poll interval.
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "dlock_sql/strategies.hpp"
#include "pg_connection.hpp"

namespace dlock::pg {

class pg_notifier final : public sql::release_notifier {
 public:
  pg_notifier(pg_settings settings, std::chrono::milliseconds connect_timeout, std::string channel);
  ~pg_notifier() override;

  std::string channel() const override { return channel_; }
  std::uint64_t arm(const std::string& name) noexcept override;
  void wait_for_release(const std::string& name, std::uint64_t armed_at,
                        std::chrono::steady_clock::time_point deadline) noexcept override;
  void disarm(const std::string& name) noexcept override;

 private:
  void run(std::stop_token stop) noexcept;

  pg_settings settings_;
  std::chrono::milliseconds connect_timeout_;
  std::string channel_;
  std::mutex m_;
  std::condition_variable_any cv_;
  // Per waited-on name (hex): notifications seen, and how many waiters care (entries die at 0).
  struct entry {
    std::uint64_t generation = 0;
    std::size_t waiters = 0;
  };
  std::map<std::string, entry, std::less<>> names_;
  bool listening_ = false;
  std::jthread thread_;  // started on the first arm()
};

}  // namespace dlock::pg
