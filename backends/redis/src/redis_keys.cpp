#include "redis_keys.hpp"

#include <cstdint>

#include "dlock/spi.hpp"

namespace dlock::redis {

key_names keys_for(std::string_view prefix, mode m, std::string_view name) {
  key_names k;
  k.key = std::string(prefix) + std::string(name);
  k.fence = redisson_prefix_name("redisson_lock_token", k.key);
  k.channel = redisson_prefix_name("redisson_lock__channel", k.key);
  if (m == mode::fair) {
    k.queue = redisson_prefix_name("redisson_lock_queue", k.key);
    k.timeout = redisson_prefix_name("redisson_lock_timeout", k.key);
  }
  k.waiting = redisson_suffix_name(k.key, "dlock_writers_waiting");
  k.permits = redisson_suffix_name(k.key, "timeout");
  k.rw_channel = redisson_prefix_name("redisson_rwlock", k.key);
  return k;
}

std::string redisson_owner_field(const settings& cfg, std::string_view owner) {
  const auto id = static_cast<std::uint64_t>(spi::sha256_int64(owner)) & 0x7fffffffffffffffULL;
  return cfg.client_id + ":" + std::to_string(id);
}

std::string redisson_prefix_name(std::string_view prefix, std::string_view name) {
  std::string out(prefix);
  if (name.find('{') != std::string_view::npos) {
    out += ":";
    out += name;
  } else {
    out += ":{";
    out += name;
    out += "}";
  }
  return out;
}

std::string redisson_suffix_name(std::string_view name, std::string_view suffix) {
  std::string out;
  if (name.find('{') != std::string_view::npos) {
    out = name;
  } else {
    out = "{";
    out += name;
    out += "}";
  }
  out += ":";
  out += suffix;
  return out;
}

rw_key_names rw_keys_for(std::string_view key, std::string_view field) {
  rw_key_names k;
  k.hash = key;
  k.channel = redisson_prefix_name("redisson_rwlock", key);
  // The name's one fencing counter, the mutex's too (keys_for), so their tokens are one sequence.
  k.token = redisson_prefix_name("redisson_lock_token", key);
  k.waiting = redisson_suffix_name(key, "dlock_writers_waiting");
  // The semaphore's permits (a conflict reports them), and where the mutex's waiters listen.
  k.permits = redisson_suffix_name(key, "timeout");
  k.mutex_channel = redisson_prefix_name("redisson_lock__channel", key);
  k.mutex_queue = redisson_prefix_name("redisson_lock_queue", key);
  k.timeout_prefix = redisson_suffix_name(key, field) + ":rwlock_timeout";
  // Redisson's getKeyPrefix: the timeout prefix up to ":<field>", i.e. "{name}" (or the name
  // itself when it has braces), to which the read unlock appends any holder's field.
  k.holders_prefix = key.find('{') != std::string_view::npos ? std::string(key) : "{" + std::string(key) + "}";
  return k;
}

semaphore_key_names semaphore_keys_for(std::string_view key) {
  semaphore_key_names k;
  k.count = key;
  k.timeouts = redisson_suffix_name(key, "timeout");
  k.channel = redisson_prefix_name("redisson_sc", key);
  k.token = redisson_prefix_name("dlock_semaphore_token", key);
  return k;
}

}  // namespace dlock::redis
