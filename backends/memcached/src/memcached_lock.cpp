#include "memcached_lock.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "capabilities.hpp"

namespace dlock::memcached {

namespace {

class memcached_lease final : public spi::lease_state {
 public:
  memcached_lease(std::shared_ptr<client_pool> pool, key_layout keys, std::string token, std::string name,
                  std::chrono::milliseconds ttl, clock::time_point valid_until, std::uint64_t fence)
      : lease_state(std::move(name), ttl, valid_until),
        pool_(std::move(pool)),
        keys_(std::move(keys)),
        token_(std::move(token)),
        fence_(fence) {}

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    // True compare-and-delete: delete only through a CAS store whose expiry is already past, so
    // an item that was replaced between our `gets` and this store is left alone.
    store_if_ours(expired_exptime, "release", ec);
  }

  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    try {
      check_ttl_fits(ttl, errc::invalid_argument, "renewal of '" + name() + "':");
    } catch (const error& e) {
      set_error(ec, e.code(), e.detail());
      return;
    }
    store_if_ours(exptime_for(ttl), "renew", ec);
  }

 private:
  bool store_if_ours(time_t exptime, std::string_view what, std::error_code& ec) noexcept {
    try {
      auto h = pool_->borrow();
      memcached_return_t rc;
      switch (memcached::store_if_ours(h.get(), keys_, token_, exptime, rc)) {
        case ownership::stored:
          return true;
        case ownership::not_ours:
          set_error(ec, errc::not_owner,
                    "memcached: " + std::string(what) + " of '" + name() +
                        "': the lock is no longer ours (expired, evicted, deleted or replaced, and maybe taken by "
                        "another owner)");
          return false;
        case ownership::failed:
          break;
      }
      set_memcached_error(ec, h.get(), rc, std::string(what) + " of '" + name() + "'");
      return false;
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
      return false;
    }
  }

  std::shared_ptr<client_pool> pool_;
  key_layout keys_;
  std::string token_;
  std::uint64_t fence_;
};

class memcached_lock final : public distributed_lock {
 public:
  memcached_lock(std::string name, lock_options options, std::shared_ptr<client_pool> pool,
                 std::shared_ptr<orphan_sweeper> sweeper, key_layout keys, bool restart_delay)
      : distributed_lock(std::move(name), memcached_caps, std::move(options)),
        pool_(std::move(pool)),
        sweeper_(std::move(sweeper)),
        keys_(std::move(keys)),
        restart_delay_(restart_delay) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      auto h = pool_->borrow();
      const auto ttl = options().ttl;
      const auto exptime = exptime_for(ttl);
      const auto start = clock::now();
      std::string token = spi::random_token();
      auto rc = memcached_add_by_key(h.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(),
                                     keys_.lock.size(), token.data(), token.size(), exptime, 0);
      if (rc == MEMCACHED_NOTSTORED || rc == MEMCACHED_DATA_EXISTS) return nullptr;  // held
      if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED) {
        set_memcached_error(ec, h.get(), rc, "acquire of '" + std::string(name()) + "' (add)");
        // The request may have been stored and only its reply lost: no grant may stay behind.
        if (is_network_failure(rc)) sweeper_->sweep(keys_, std::move(token), exptime);
        return nullptr;
      }
      std::uint64_t fence = 0;
      switch (next_fence(h.get(), ttl, fence, ec)) {
        case fence_status::issued:
          return std::make_unique<memcached_lease>(pool_, keys_, std::move(token), std::string(name()), ttl,
                                                   spi::lease_state::validity_after(start, ttl), fence);
        case fence_status::server_restarted_recently:
          withdraw(h.get(), std::move(token), exptime);
          return nullptr;  // contention: holders from before the restart may still be working
        case fence_status::failed:
          break;
      }
      withdraw(h.get(), std::move(token), exptime);  // a fencing lock never grants without a token
      return nullptr;
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
      return nullptr;
    }
  }

 private:
  enum class fence_status { issued,
                            server_restarted_recently,
                            failed };

  // incr on the name's counter. ASCII incr does not create a missing counter, and a missing one
  // means a first use of the name, or a counter lost with a restart, an eviction or a delete: it is
  // created at fence_seed(server time), above every token the lost counter gave (README: Fencing).
  // A server younger than min_uptime_to_grant(ttl) (it restarted: holders from before may still be
  // inside their validity) creates nothing and grants nothing, unless restart_delay=off.
  fence_status next_fence(memcached_st* m, std::chrono::milliseconds ttl, std::uint64_t& token,
                          std::error_code& ec) const noexcept {
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto rc = memcached_increment_by_key(m, keys_.group.data(), keys_.group.size(), keys_.fence.data(),
                                           keys_.fence.size(), 1, &token);
      if (rc == MEMCACHED_SUCCESS) return fence_status::issued;
      if (rc != MEMCACHED_NOTFOUND) {
        set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name()) + "' (incr)");
        return fence_status::failed;
      }
      const auto server = read_server_clock(m, keys_, rc);
      if (!server) {
        set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name()) + "' (stats of its server)");
        return fence_status::failed;
      }
      if (restart_delay_ && server->uptime < min_uptime_to_grant(ttl)) return fence_status::server_restarted_recently;
      const auto seed = std::to_string(fence_seed(server->unix_time));
      // Never expires; of two seeders one `add` wins, and both then incr the same counter.
      rc = memcached_add_by_key(m, keys_.group.data(), keys_.group.size(), keys_.fence.data(), keys_.fence.size(),
                                seed.data(), seed.size(), 0, 0);
      if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED && rc != MEMCACHED_NOTSTORED &&
          rc != MEMCACHED_DATA_EXISTS) {
        set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name()) + "' (add of the counter)");
        return fence_status::failed;
      }
    }
    set_error(ec, errc::backend_error,
              "memcached: fencing token of '" + std::string(name()) +
                  "': its counter vanished three times in a row right after being created (is the server out of "
                  "memory?)");
    return fence_status::failed;
  }

  // Takes back a grant we will not hand out: an owner-checked delete now, or by the sweeper once
  // the server answers again.
  void withdraw(memcached_st* m, std::string token, time_t exptime) const noexcept {
    memcached_return_t rc;
    if (store_if_ours(m, keys_, token, expired_exptime, rc) == ownership::failed)
      sweeper_->sweep(keys_, std::move(token), exptime);
  }

  std::shared_ptr<client_pool> pool_;
  std::shared_ptr<orphan_sweeper> sweeper_;
  key_layout keys_;
  bool restart_delay_;
};

}  // namespace

memcached_backend::memcached_backend(const uri& u, const lock_options& defaults)
    : backend(memcached_caps, lock_scope::network, name_limits{}, defaults, u.redacted()),
      prefix_(u.get("prefix").value_or("dlock:")),
      restart_delay_(u.get_bool("restart_delay").value_or(true)) {
  const auto connect_timeout = u.get_duration("connect_timeout").value_or(std::chrono::seconds{2});
  const auto io_timeout = u.get_duration("command_timeout").value_or(std::chrono::seconds{2});
  const auto pool_size = u.get_int("pool_size", 1, 1024).value_or(16);
  check_ttl_fits(defaults.ttl, errc::invalid_uri, u.redacted() + ":");
  if (prefix_.size() > 64) throw error(errc::invalid_uri, u.redacted() + ": prefix must be at most 64 bytes");
  for (unsigned char c : prefix_)
    if (c <= 0x20 || c >= 0x7f) throw error(errc::invalid_uri, u.redacted() + ": prefix must be printable ASCII without spaces");
  pool_ = std::make_shared<client_pool>(make_handle(u, connect_timeout, io_timeout), static_cast<std::size_t>(pool_size));
  sweeper_ = std::make_shared<orphan_sweeper>(pool_);
  // Reach every server once so a wrong address fails at open, not at the first acquire.
  auto h = pool_->borrow();
  memcached_return_t rc = MEMCACHED_SUCCESS;
  memcached_version(h.get());
  for (uint32_t i = 0; i < memcached_server_count(h.get()); ++i) {
    const memcached_instance_st* s = memcached_server_instance_by_position(h.get(), i);
    if (memcached_server_major_version(s) == UINT8_MAX) rc = MEMCACHED_CONNECTION_FAILURE;
    if (memcached_failed(rc))
      throw error(errc::backend_unavailable, "memcached: cannot reach " + std::string(memcached_server_name(s)) + ":" +
                                                 std::to_string(memcached_server_port(s)) + " of " + u.redacted());
  }
}

std::unique_ptr<distributed_lock> memcached_backend::do_make_lock(std::string name, lock_options options) {
  check_ttl_fits(options.ttl, errc::invalid_argument, "lock '" + name + "':");
  auto keys = keys_for(prefix_, name);
  return std::make_unique<memcached_lock>(std::move(name), std::move(options), pool_, sweeper_, std::move(keys),
                                          restart_delay_);
}

}  // namespace dlock::memcached
