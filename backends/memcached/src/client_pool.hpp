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

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "server_time.hpp"

namespace dlock::memcached {

struct memc_deleter {
  void operator()(memcached_st* m) const noexcept { memcached_free(m); }
};
using memc_ptr = std::unique_ptr<memcached_st, memc_deleter>;

// Builds one configured handle for the URI's servers: ASCII protocol, CAS support, ketama
// consistent hashing, timeouts. Throws dlock::error(invalid_uri) if the URI has no host or an empty
// one (":11211", which libmemcached would take for localhost).
memc_ptr make_handle(const uri& u, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout);

class client_pool {
 public:
  // connect_timeout, io_timeout: the prototype's (make_handle's), which an acquire cuts to its
  // deadline for a while (acquire_deadline.hpp: io_bound) and puts back.
  client_pool(memc_ptr prototype, std::size_t max_size, std::chrono::milliseconds connect_timeout,
              std::chrono::milliseconds io_timeout);
  std::chrono::milliseconds connect_timeout() const noexcept { return connect_timeout_; }
  std::chrono::milliseconds io_timeout() const noexcept { return io_timeout_; }

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
  // Blocks while max_size handles are out, inside an acquire's deadline scope until its
  // io_deadline() (then throws dlock::error backend_unavailable). Never returns an empty handle
  // (clone failure throws).
  handle borrow();

 private:
  void give_back(memc_ptr m) noexcept;
  memc_ptr prototype_;
  std::size_t max_size_;
  std::chrono::milliseconds connect_timeout_, io_timeout_;
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
  std::string fence;  // prefix + "fence:" + group; the fencing base (read, written once)
  // prefix + "sems:" + group: the record that the name is used as a semaphore, value = its
  // max_count (memcached_semaphore.hpp: one name, one lock). Empty in a semaphore slot's layout.
  std::string semaphores;
};
// memcached keys: at most 250 bytes, no spaces or control bytes. Names that fit are used as they
// are; any other name is "#<readable start>.<sha256 hex>" (dlock::spi::safe_key), which no name
// used as it is can equal, so distinct names never share a key.
key_layout keys_for(std::string_view prefix, std::string_view name);
inline constexpr std::size_t max_key_bytes = 250;

// memcached reads an exptime over 30 days as an absolute unix time, so the longest relative one is
// 30 days and the longest ttl is one second less (exptime_for adds a second).
inline constexpr std::chrono::seconds max_relative_exptime{60 * 60 * 24 * 30};
inline constexpr std::chrono::milliseconds max_ttl = max_relative_exptime - std::chrono::seconds{1};
// Throws dlock::error(code) naming the limit when ttl > max_ttl. `what`: whose ttl it is.
void check_ttl_fits(std::chrono::milliseconds ttl, errc code, std::string_view what);

// An absolute unix time in the past (> 30 days, so memcached reads it as absolute): a CAS store
// with it makes the item expire at once. Positive, so every libmemcached version formats it.
inline constexpr time_t expired_exptime = 60 * 60 * 24 * 30 + 1;

// The server's own clock, from `stats`: what survives a restart (unix_time) and how long ago the
// process started (uptime, as memcached reports it: see min_uptime_to_grant).
struct server_clock {
  std::chrono::seconds uptime{0};
  std::chrono::seconds unix_time{0};
};
// `stats` of the one server the name (k.group) hashes to: through m when it knows one server, else
// through a short-lived handle to that server alone with m's timeouts (libmemcached's stats would
// ask every server of the ring).
std::optional<server_clock> read_server_clock(memcached_st* m, const key_layout& k, memcached_return_t& rc);

// The fencing token the first grant after a name's fencing base was created at `unix_time` (the
// server's clock) gets: unix_time * 2^20. Later grants add the growth of the server's CAS
// uniques, so tokens stay above every earlier token of the name as long as the server does fewer
// than 2^20 stores a second and its clock does not step back (see README: Fencing).
std::uint64_t fence_seed(std::chrono::seconds unix_time) noexcept;

// A grant's fencing token: the name's fencing base (a signed decimal, created once as
// fence_seed(time) - the CAS unique of the grant that created it) plus the grant's own CAS
// unique, which the server raises on every store. nullopt when the base is not a number or the
// sum does not fit (never for a base this version wrote).
std::optional<std::uint64_t> fence_from(std::string_view base, std::uint64_t cas) noexcept;
// The base to create for a grant of CAS unique `cas` at server time `unix_time`, as stored.
std::string fence_base_for(std::chrono::seconds unix_time, std::uint64_t cas);

struct item {
  std::string value;
  std::uint64_t cas = 0;
};
// `gets`: the value and its CAS unique. nullopt with MEMCACHED_NOTFOUND when absent.
std::optional<item> gets(memcached_st* m, const key_layout& k, const std::string& key, memcached_return_t& rc);

// The lock item and the fencing base of one name, read with one `gets` of both keys (one round trip).
struct grant_items {
  std::optional<item> lock;
  std::optional<item> fence;
  std::optional<item> semaphores;  // k.semaphores, read in the same `gets` when k has it
};
// rc: MEMCACHED_SUCCESS when the server answered (any item may be absent), else why not.
grant_items read_grant(memcached_st* m, const key_layout& k, memcached_return_t& rc);

// What a CAS-guarded store of our own grant found.
enum class ownership { stored, not_ours, failed };
// `gets` the lock item; if it still carries `token`, `cas` it with `exptime` (expired_exptime
// deletes it). not_ours: absent, another token, or replaced between the two commands (rc tells
// which command failed when the result is `failed`).
ownership store_if_ours(memcached_st* m, const key_layout& k, std::string_view token, time_t exptime,
                        memcached_return_t& rc);
// The same `cas` store without the `gets`, for a caller that knows the item's CAS unique (from the
// grant or its last renewal). not_ours only when the item is gone; `replaced` when its CAS unique
// changed (another owner's item, or ours re-stored by a renewal): store_if_ours decides then.
enum class known_cas_store { stored, gone, replaced, failed };
known_cas_store store_with_cas(memcached_st* m, const key_layout& k, std::string_view token, time_t exptime,
                               std::uint64_t cas, memcached_return_t& rc);

// Translates a failed status to errc::backend_unavailable (network) or backend_error (protocol).
void set_memcached_error(std::error_code& ec, memcached_st* m, memcached_return_t rc, std::string_view what);
bool is_network_failure(memcached_return_t rc) noexcept;

}  // namespace dlock::memcached
