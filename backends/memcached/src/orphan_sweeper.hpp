#pragma once
// Grants nobody holds: an `add` whose reply was lost (timeout, dropped connection) may still have
// stored the item, before the reply was lost or later, when a stalled server resumes and reads the
// request. Nobody would release it, so the name would stay taken for a whole ttl. The sweeper
// deletes such an item once the server answers again, by owner check (gets + compare the token +
// CAS-guarded delete), never a plain delete: a new holder's item is left alone.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "client_pool.hpp"

namespace dlock::memcached {

class orphan_sweeper {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds retry_every{200};

  explicit orphan_sweeper(std::shared_ptr<client_pool> pool);
  ~orphan_sweeper();  // stops the thread (waits for a command in flight, at most command_timeout)
  orphan_sweeper(const orphan_sweeper&) = delete;
  orphan_sweeper& operator=(const orphan_sweeper&) = delete;

  // Our `add` of `token` with `exptime` may have been stored without our knowing. The sweeper
  // deletes it if it is there, and watches until it must have expired: exptime after the server
  // first answered again (a request still queued then is read right after). Never throws.
  void sweep(key_layout keys, std::string token, time_t exptime) noexcept;

  // How many possible grants are still being watched (tests).
  std::size_t pending() const;

 private:
  struct orphan {
    key_layout keys;
    std::string token;
    std::chrono::seconds exptime;
    std::optional<clock::time_point> gone_by;  // set when the server first answers
  };
  void run(std::stop_token stop);
  // One attempt: true when the orphan needs no more watching.
  bool settle(memcached_st* m, orphan& o);

  std::shared_ptr<client_pool> pool_;
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  std::vector<orphan> orphans_;
  std::jthread thread_;  // started by the first sweep(); last member: stopped and joined first
};

}  // namespace dlock::memcached
