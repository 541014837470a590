#include "client_pool.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>

#include "acquire_deadline.hpp"
#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock::memcached {

namespace {

memc_ptr configured_handle(std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout) {
  memc_ptr m(memcached_create(nullptr));
  if (!m) throw error(errc::backend_unavailable, "memcached: out of memory creating a client");
  // ASCII protocol on purpose: over the binary protocol a CAS store with a past expiry answers
  // SUCCESS and keeps the item, which would turn release into a no-op.
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 0);
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, static_cast<uint64_t>(connect_timeout.count()));
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<uint64_t>(io_timeout.count()));
  // A dead server is retried after 1s instead of being dropped from the ring: dropping it would
  // move its names to another server, where a second holder could acquire them.
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 1);
  memcached_behavior_set(m.get(), MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 0);
  return m;
}

}  // namespace

memc_ptr make_handle(const uri& u, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout) {
  if (u.hosts().empty()) throw error(errc::invalid_uri, u.redacted() + ": expected at least one host:port");
  for (const auto& h : u.hosts())
    if (h.host.empty())  // libmemcached would read it as localhost: a templated ${HOST} left unset
      throw error(errc::invalid_uri, u.redacted() + ": a server has no host; expected host:port, e.g. 127.0.0.1:11211");
  auto m = configured_handle(connect_timeout, io_timeout);
  for (const auto& h : u.hosts()) {
    const auto rc = memcached_server_add(m.get(), h.host.c_str(), h.port_or(11211));
    if (memcached_failed(rc))
      throw error(errc::invalid_uri,
                  u.redacted() + ": cannot use server " + h.to_string() + ": " + memcached_strerror(m.get(), rc));
  }
  return m;
}

client_pool::client_pool(memc_ptr prototype, std::size_t max_size, std::chrono::milliseconds connect_timeout,
                         std::chrono::milliseconds io_timeout)
    : prototype_(std::move(prototype)),
      max_size_(max_size == 0 ? 1 : max_size),
      connect_timeout_(connect_timeout),
      io_timeout_(io_timeout) {}

client_pool::handle::~handle() {
  if (m_) pool_->give_back(std::move(m_));
}

client_pool::handle client_pool::borrow() {
  std::unique_lock lock(mutex_);
  const auto free = [&] { return !idle_.empty() || out_ < max_size_; };
  const auto until = io_deadline();
  if (until == std::chrono::steady_clock::time_point::max())
    returned_.wait(lock, free);
  else if (!returned_.wait_until(lock, until, free))
    throw error(errc::backend_unavailable,
                "memcached: every client handle stayed in use until the caller's deadline (pool_size=" +
                    std::to_string(max_size_) + ")");
  ++out_;
  if (!idle_.empty()) {
    memc_ptr m = std::move(idle_.back());
    idle_.pop_back();
    return handle(*this, std::move(m));
  }
  lock.unlock();
  memc_ptr m(memcached_clone(nullptr, prototype_.get()));
  if (!m) {
    std::lock_guard relock(mutex_);
    --out_;
    returned_.notify_one();
    throw error(errc::backend_unavailable, "memcached: cannot clone a client handle");
  }
  return handle(*this, std::move(m));
}

void client_pool::give_back(memc_ptr m) noexcept {
  std::lock_guard lock(mutex_);
  --out_;
  idle_.push_back(std::move(m));
  returned_.notify_one();
}

key_layout keys_for(std::string_view prefix, std::string_view name) {
  const std::size_t longest_suffix = std::string_view("fence:").size();
  const std::size_t room = max_key_bytes - prefix.size() - longest_suffix;
  key_layout k;
  k.group = spi::safe_key(
      name, room, [](unsigned char c) { return c > 0x20 && c < 0x7f; }, "#");
  k.lock = std::string(prefix) + "lock:" + k.group;
  k.fence = std::string(prefix) + "fence:" + k.group;
  k.semaphores = std::string(prefix) + "sems:" + k.group;
  return k;
}

void check_ttl_fits(std::chrono::milliseconds ttl, errc code, std::string_view what) {
  if (ttl <= max_ttl) return;
  throw error(code, "memcached: " + std::string(what) + " ttl of " + std::to_string(ttl.count()) +
                        " ms is too long: at most " + std::to_string(max_ttl.count()) +
                        " ms (30 days less one second; memcached reads a longer expiry as an absolute date)");
}

std::optional<item> gets(memcached_st* m, const key_layout& k, const std::string& key, memcached_return_t& rc) {
  const char* keys[1] = {key.data()};
  const size_t lens[1] = {key.size()};
  rc = memcached_mget_by_key(m, k.group.data(), k.group.size(), keys, lens, 1);
  if (memcached_failed(rc)) return std::nullopt;
  std::optional<item> found;
  memcached_result_st* r = nullptr;
  memcached_return_t frc = MEMCACHED_SUCCESS;
  while ((r = memcached_fetch_result(m, nullptr, &frc)) != nullptr) {
    if (!found)
      found = item{std::string(memcached_result_value(r), memcached_result_length(r)), memcached_result_cas(r)};
    memcached_result_free(r);
  }
  if (frc != MEMCACHED_END && frc != MEMCACHED_SUCCESS && frc != MEMCACHED_NOTFOUND) {
    rc = frc;
    return std::nullopt;
  }
  rc = found ? MEMCACHED_SUCCESS : MEMCACHED_NOTFOUND;
  return found;
}

namespace {

// memcached_stat_execute callback: picks `uptime` and `time` out of the `stats` lines.
memcached_return_t collect_clock(const memcached_instance_st*, const char* key, size_t key_length, const char* value,
                                 size_t value_length, void* context) {
  auto& clock = *static_cast<server_clock*>(context);
  const std::string_view k(key, key_length);
  std::chrono::seconds* field = k == "uptime" ? &clock.uptime : k == "time" ? &clock.unix_time : nullptr;
  if (field) *field = std::chrono::seconds(std::stoll(std::string(value, value_length)));
  return MEMCACHED_SUCCESS;
}

}  // namespace

namespace {

// `stats` through m, which must know exactly one server.
std::optional<server_clock> stats_clock(memcached_st* m, memcached_return_t& rc) {
  server_clock clock;
  try {
    rc = memcached_stat_execute(m, nullptr, collect_clock, &clock);
  } catch (const std::exception&) {  // a number that does not parse
    rc = MEMCACHED_PROTOCOL_ERROR;
  }
  if (memcached_failed(rc)) return std::nullopt;
  if (clock.unix_time <= std::chrono::seconds::zero()) {
    rc = MEMCACHED_PROTOCOL_ERROR;  // no `time` line: not a memcached we know
    return std::nullopt;
  }
  return clock;
}

}  // namespace

std::optional<server_clock> read_server_clock(memcached_st* m, const key_layout& k, memcached_return_t& rc) {
  // One server: its pooled connection answers. A ring: a short-lived handle to the name's server
  // alone, so the other servers (maybe down) are not asked.
  if (memcached_server_count(m) == 1) return stats_clock(m, rc);
  rc = MEMCACHED_SUCCESS;  // memcached_server_by_key sets it only on failure
  const memcached_instance_st* server = memcached_server_by_key(m, k.group.data(), k.group.size(), &rc);
  if (!server || memcached_failed(rc)) {
    if (!memcached_failed(rc)) rc = MEMCACHED_NO_SERVERS;
    return std::nullopt;
  }
  auto one = configured_handle(std::chrono::milliseconds(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT)),
                               std::chrono::milliseconds(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT)));
  rc = memcached_server_add(one.get(), memcached_server_name(server), memcached_server_port(server));
  if (memcached_failed(rc)) return std::nullopt;
  return stats_clock(one.get(), rc);
}

std::uint64_t fence_seed(std::chrono::seconds unix_time) noexcept {
  return static_cast<std::uint64_t>(unix_time.count()) << 20;
}

std::optional<std::uint64_t> fence_from(std::string_view base, std::uint64_t cas) noexcept {
  std::int64_t b = 0;
  const auto [end, err] = std::from_chars(base.data(), base.data() + base.size(), b);
  if (err != std::errc{} || end != base.data() + base.size() || base.empty()) return std::nullopt;
  if (cas > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  std::int64_t token = 0;
  if (__builtin_add_overflow(b, static_cast<std::int64_t>(cas), &token) || token <= 0) return std::nullopt;
  return static_cast<std::uint64_t>(token);
}

std::string fence_base_for(std::chrono::seconds unix_time, std::uint64_t cas) {
  return std::to_string(static_cast<std::int64_t>(fence_seed(unix_time)) - static_cast<std::int64_t>(cas));
}

grant_items read_grant(memcached_st* m, const key_layout& k, memcached_return_t& rc) {
  const char* keys[3] = {k.lock.data(), k.fence.data(), k.semaphores.data()};
  const size_t lens[3] = {k.lock.size(), k.fence.size(), k.semaphores.size()};
  grant_items found;
  rc = memcached_mget_by_key(m, k.group.data(), k.group.size(), keys, lens, k.semaphores.empty() ? 2 : 3);
  if (memcached_failed(rc)) return found;
  memcached_result_st* r = nullptr;
  memcached_return_t frc = MEMCACHED_SUCCESS;
  while ((r = memcached_fetch_result(m, nullptr, &frc)) != nullptr) {
    const std::string_view key(memcached_result_key_value(r), memcached_result_key_length(r));
    auto& slot = key == k.lock ? found.lock : key == k.fence ? found.fence : found.semaphores;
    slot = item{std::string(memcached_result_value(r), memcached_result_length(r)), memcached_result_cas(r)};
    memcached_result_free(r);
  }
  rc = (frc == MEMCACHED_END || frc == MEMCACHED_SUCCESS || frc == MEMCACHED_NOTFOUND) ? MEMCACHED_SUCCESS : frc;
  return found;
}

ownership store_if_ours(memcached_st* m, const key_layout& k, std::string_view token, time_t exptime,
                        memcached_return_t& rc) {
  const auto current = gets(m, k, k.lock, rc);
  if (rc == MEMCACHED_NOTFOUND || (current && current->value != token)) return ownership::not_ours;
  if (!current) return ownership::failed;
  rc = memcached_cas_by_key(m, k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(), token.size(),
                            exptime, 0, current->cas);
  if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED) return ownership::stored;
  if (rc == MEMCACHED_DATA_EXISTS || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_NOTSTORED) return ownership::not_ours;
  return ownership::failed;
}

known_cas_store store_with_cas(memcached_st* m, const key_layout& k, std::string_view token, time_t exptime,
                               std::uint64_t cas, memcached_return_t& rc) {
  rc = memcached_cas_by_key(m, k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), token.data(), token.size(),
                            exptime, 0, cas);
  if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED) return known_cas_store::stored;
  if (rc == MEMCACHED_NOTFOUND) return known_cas_store::gone;
  if (rc == MEMCACHED_DATA_EXISTS || rc == MEMCACHED_NOTSTORED) return known_cas_store::replaced;
  return known_cas_store::failed;
}

bool is_network_failure(memcached_return_t rc) noexcept {
  switch (rc) {
    case MEMCACHED_CONNECTION_FAILURE:
    case MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE:
    case MEMCACHED_HOST_LOOKUP_FAILURE:
    case MEMCACHED_READ_FAILURE:
    case MEMCACHED_WRITE_FAILURE:
    case MEMCACHED_UNKNOWN_READ_FAILURE:
    case MEMCACHED_TIMEOUT:
    case MEMCACHED_SERVER_MARKED_DEAD:
    case MEMCACHED_SERVER_TEMPORARILY_DISABLED:
    case MEMCACHED_NO_SERVERS:
    case MEMCACHED_ERRNO:
    case MEMCACHED_CONNECTION_BIND_FAILURE: return true;
    default: return false;
  }
}

void set_memcached_error(std::error_code& ec, memcached_st* m, memcached_return_t rc, std::string_view what) {
  std::string message = "memcached: ";
  message += what;
  message += ": ";
  message += memcached_strerror(m, rc);
  if (const char* detail = memcached_last_error_message(m); detail) {
    message += " (";
    message += detail;
    message += ")";
  }
  set_error(ec, is_network_failure(rc) ? errc::backend_unavailable : errc::backend_error, std::move(message));
}

}  // namespace dlock::memcached
