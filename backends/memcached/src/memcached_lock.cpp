#include "memcached_lock.hpp"

#include <optional>
#include <string>

namespace dlock::memcached {

capabilities declared_caps() noexcept {
  return {capability::expiring, capability::renewable, capability::fencing, capability::lost_notification};
}

namespace {

class memcached_lease final : public spi::lease_state {
 public:
  memcached_lease(std::shared_ptr<client_pool> pool, key_layout keys, std::string token, std::string name,
                  std::chrono::milliseconds ttl, clock::time_point valid_until, std::optional<std::uint64_t> fence)
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
    store_if_ours(exptime_for(ttl), "renew", ec);
  }

 private:
  bool store_if_ours(time_t exptime, std::string_view what, std::error_code& ec) noexcept {
    try {
      auto h = pool_->borrow();
      memcached_return_t rc;
      const auto current = gets(h.get(), keys_, keys_.lock, rc);
      if (rc == MEMCACHED_NOTFOUND || (current && current->value != token_)) {
        set_error(ec, errc::not_owner,
                  "memcached: " + std::string(what) + " of '" + name() +
                      "': the lock is no longer ours (expired, evicted or deleted, and maybe taken by another owner)");
        return false;
      }
      if (!current) {
        set_memcached_error(ec, h.get(), rc, std::string(what) + " of '" + name() + "' (gets)");
        return false;
      }
      rc = memcached_cas_by_key(h.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(),
                                keys_.lock.size(), token_.data(), token_.size(), exptime, 0, current->cas);
      if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED) return true;
      if (rc == MEMCACHED_DATA_EXISTS || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_NOTSTORED) {
        set_error(ec, errc::not_owner,
                  "memcached: " + std::string(what) + " of '" + name() + "': the item changed under us (CAS mismatch)");
        return false;
      }
      set_memcached_error(ec, h.get(), rc, std::string(what) + " of '" + name() + "' (cas)");
      return false;
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
      return false;
    }
  }

  std::shared_ptr<client_pool> pool_;
  key_layout keys_;
  std::string token_;
  std::optional<std::uint64_t> fence_;
};

class memcached_lock final : public distributed_lock {
 public:
  memcached_lock(std::string name, lock_options options, std::shared_ptr<client_pool> pool, key_layout keys)
      : distributed_lock(std::move(name), declared_caps(), std::move(options)),
        pool_(std::move(pool)),
        keys_(std::move(keys)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      auto h = pool_->borrow();
      const auto ttl = options().ttl;
      const auto start = clock::now();
      std::string token = spi::random_token();
      auto rc = memcached_add_by_key(h.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(),
                                     keys_.lock.size(), token.data(), token.size(), exptime_for(ttl), 0);
      if (rc == MEMCACHED_NOTSTORED || rc == MEMCACHED_DATA_EXISTS) return nullptr;  // held
      if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED) {
        set_memcached_error(ec, h.get(), rc, "acquire of '" + std::string(name()) + "' (add)");
        return nullptr;
      }
      const auto fence = next_fence(h.get());
      return std::make_unique<memcached_lease>(pool_, keys_, std::move(token), std::string(name()), ttl,
                                               spi::lease_state::validity_after(start, ttl), fence);
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
      return nullptr;
    }
  }

 private:
  // incr on the name's counter, created at 0 when missing (ASCII incr does not create). Best
  // effort: nullopt if the counter cannot be read; memcached may evict it (see README).
  std::optional<std::uint64_t> next_fence(memcached_st* m) const noexcept {
    for (int attempt = 0; attempt < 3; ++attempt) {
      uint64_t value = 0;
      auto rc = memcached_increment_by_key(m, keys_.group.data(), keys_.group.size(), keys_.fence.data(),
                                           keys_.fence.size(), 1, &value);
      if (rc == MEMCACHED_SUCCESS) return value;
      if (rc != MEMCACHED_NOTFOUND) return std::nullopt;
      // Missing: create it (never expires); a concurrent add losing is fine, retry the incr.
      memcached_add_by_key(m, keys_.group.data(), keys_.group.size(), keys_.fence.data(), keys_.fence.size(), "0",
                           1, 0, 0);
    }
    return std::nullopt;
  }

  std::shared_ptr<client_pool> pool_;
  key_layout keys_;
};

}  // namespace

memcached_backend::memcached_backend(const uri& u, const lock_options& defaults)
    : backend(declared_caps(), lock_scope::network, name_limits{}, defaults, u.redacted()),
      prefix_(u.get("prefix").value_or("dlock:")) {
  const auto connect_timeout = u.get_duration("connect_timeout").value_or(std::chrono::seconds{2});
  const auto io_timeout = u.get_duration("command_timeout").value_or(std::chrono::seconds{2});
  const auto pool_size = u.get_int("pool_size", 1, 1024).value_or(16);
  if (prefix_.size() > 64) throw error(errc::invalid_uri, u.redacted() + ": prefix must be at most 64 bytes");
  for (unsigned char c : prefix_)
    if (c <= 0x20 || c >= 0x7f) throw error(errc::invalid_uri, u.redacted() + ": prefix must be printable ASCII without spaces");
  pool_ = std::make_shared<client_pool>(make_handle(u, connect_timeout, io_timeout), static_cast<std::size_t>(pool_size));
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
  auto keys = keys_for(prefix_, name);
  return std::make_unique<memcached_lock>(std::move(name), std::move(options), pool_, std::move(keys));
}

}  // namespace dlock::memcached
