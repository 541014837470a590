#pragma once
// A pool of libmemcached handles (a memcached_st is not thread-safe), the key layout, and the
// few commands the lock needs, each as one function returning a libmemcached status.
#include <libmemcached/memcached.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/uri.hpp"

namespace dlock::memcached {

struct memc_deleter {
  void operator()(memcached_st* m) const noexcept { memcached_free(m); }
};
using memc_ptr = std::unique_ptr<memcached_st, memc_deleter>;

// Builds one configured handle for the URI's servers: ASCII protocol, CAS support, ketama
// consistent hashing, timeouts. Throws dlock::error(backend_unavailable) if the URI has no host.
memc_ptr make_handle(const uri& u, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout);

class client_pool {
 public:
  client_pool(memc_ptr prototype, std::size_t max_size);

  class handle {
   public:
    handle(client_pool& pool, memc_ptr m) noexcept : pool_(&pool), m_(std::move(m)) {}
    handle(handle&&) noexcept = default;
    ~handle();
    memcached_st* get() const noexcept { return m_.get(); }
   private:
    client_pool* pool_;
    memc_ptr m_;
  };
  // Blocks while max_size handles are out. Never returns an empty handle (clone failure throws).
  handle borrow();

 private:
  void give_back(memc_ptr m) noexcept;
  memc_ptr prototype_;
  std::size_t max_size_;
  std::size_t out_ = 0;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<memc_ptr> idle_;
};

// The server keys of one lock name. Every key of a name is stored on the server the mapped name
// hashes to (libmemcached's *_by_key with `group` as the hashing key).
struct key_layout {
  std::string group;  // the mapped name (safe_key): what consistent hashing sees
  std::string lock;   // prefix + "lock:" + group; value = the grant's token
  std::string fence;  // prefix + "fence:" + group; an incr counter
};
// memcached keys: at most 250 bytes, no spaces or control bytes. Names that fit are used as they
// are; any other name is "#<readable start>.<sha256 hex>" (dlock::spi::safe_key), which no name
// used as it is can equal, so distinct names never share a key.
key_layout keys_for(std::string_view prefix, std::string_view name);
inline constexpr std::size_t max_key_bytes = 250;

// Whole seconds for memcached: ceil(ttl) + 1. The +1 absorbs memcached's one-second clock, which
// may expire an item up to one second early; never 0 (0 means "never expires").
time_t exptime_for(std::chrono::milliseconds ttl) noexcept;
// An absolute unix time in the past (> 30 days, so memcached reads it as absolute): a CAS store
// with it makes the item expire at once. Positive, so every libmemcached version formats it.
inline constexpr time_t expired_exptime = 60 * 60 * 24 * 30 + 1;

struct item {
  std::string value;
  std::uint64_t cas = 0;
};
// `gets`: the value and its CAS unique. nullopt with MEMCACHED_NOTFOUND when absent.
std::optional<item> gets(memcached_st* m, const key_layout& k, const std::string& key, memcached_return_t& rc);

// Translates a failed status to errc::backend_unavailable (network) or backend_error (protocol).
void set_memcached_error(std::error_code& ec, memcached_st* m, memcached_return_t rc, std::string_view what);
bool is_network_failure(memcached_return_t rc) noexcept;

}  // namespace dlock::memcached
