#pragma once
// redis:// (SET NX PX, redis-py layout), redis+reentrant:// (Redisson RLock layout) and
// redis+fair:// (Redisson RFairLock layout).
#include <memory>
#include <mutex>
#include <string>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "subscriber.hpp"

namespace dlock::redis {

enum class mode { simple, reentrant, fair };

struct settings {
  endpoint where;
  std::size_t pool_size = 16;
  std::string prefix;     // prepended to every key; empty = redis-py / Redisson layout
  std::string client_id;  // Redisson client UUID in owner fields
  mode lock_mode = mode::simple;
  std::chrono::milliseconds fair_wait{300000};  // Redisson's threadWaitTime (fairLockWaitTimeout)
};

settings parse_settings(const uri& u, mode m);  // throws dlock::error(invalid_uri)
capabilities caps_of(mode m) noexcept;

// What every lock and lease of one backend shares: the pool and the subscriber.
struct shared {
  settings config;
  std::shared_ptr<pool> connections;
  std::shared_ptr<subscriber> subscriber_for_waits() noexcept;  // started on first wait

 private:
  std::mutex mutex_;
  std::shared_ptr<subscriber> subscriber_;
};

class redis_backend final : public backend {
 public:
  redis_backend(const uri& u, const lock_options& defaults, mode m);
  const std::shared_ptr<shared>& state() const noexcept { return shared_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;

 private:
  std::shared_ptr<shared> shared_;
};

// Redisson's hash-tagged derived names: prefixName(p, n) = p + ":{" + n + "}" (braces omitted
// when n already contains '{').
std::string redisson_prefix_name(std::string_view prefix, std::string_view name);

}  // namespace dlock::redis
