// The well-known memcached lock recipe as it is usually written: add(key, value, exptime) wins, delete(key)
// releases. No CAS, no fencing counter, no sweeper, no restart delay: the point is its failure.
#include "unsafe_delete.hpp"

#include "capabilities.hpp"
#include "client_pool.hpp"
#include "dlock/spi.hpp"

namespace dlock::memcached {

namespace {

constexpr const char* scheme = "memcached+unsafe-delete";

// Released by a plain delete: whoever holds the item now loses it. A delete that finds nothing
// says so (not_owner); one that finds a successor's item deletes it silently.
class unsafe_delete_lease final : public spi::lease_state {
 public:
  unsafe_delete_lease(std::shared_ptr<client_pool> pool, key_layout keys, std::string name,
                      std::chrono::milliseconds ttl, clock::time_point start)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)), pool_(std::move(pool)), keys_(std::move(keys)) {}

 protected:
  void do_release(std::error_code& ec) noexcept override {
    try {
      auto h = pool_->borrow();
      const auto rc = memcached_delete_by_key(h.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(),
                                              keys_.lock.size(), 0);
      if (rc == MEMCACHED_NOTFOUND)
        set_error(ec, errc::not_owner, std::string(scheme) + ": lock '" + name() + "' was already gone at release");
      else if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_DELETED)
        set_memcached_error(ec, h.get(), rc, "release of '" + name() + "' (delete)");
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string(scheme) + ": " + e.what());
    }
  }

 private:
  std::shared_ptr<client_pool> pool_;
  key_layout keys_;
};

class unsafe_delete_lock final : public distributed_lock {
 public:
  unsafe_delete_lock(std::string name, lock_options options, std::shared_ptr<client_pool> pool, key_layout keys)
      : distributed_lock(std::move(name), memcached_unsafe_delete_caps, std::move(options)),
        pool_(std::move(pool)),
        keys_(std::move(keys)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      auto h = pool_->borrow();
      const auto start = clock::now();
      const auto token = spi::random_token();
      const auto rc =
          memcached_add_by_key(h.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(), keys_.lock.size(),
                               token.data(), token.size(), exptime_for(options().ttl), 0);
      if (rc == MEMCACHED_NOTSTORED || rc == MEMCACHED_DATA_EXISTS) return nullptr;  // held
      if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED) {
        set_memcached_error(ec, h.get(), rc, "acquire of '" + std::string(name()) + "' (add)");
        return nullptr;
      }
      return std::make_unique<unsafe_delete_lease>(pool_, keys_, std::string(name()), options().ttl, start);
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string(scheme) + ": " + e.what());
      return nullptr;
    }
  }

 private:
  std::shared_ptr<client_pool> pool_;
  key_layout keys_;
};

class unsafe_delete_backend final : public backend {
 public:
  unsafe_delete_backend(const uri& u, const lock_options& defaults)
      : backend(memcached_unsafe_delete_caps, lock_scope::network, name_limits{}, defaults, u.redacted()),
        prefix_(u.get("prefix").value_or("dlock:")) {
    check_ttl_fits(defaults.ttl, errc::invalid_uri, u.redacted() + ":");
    const auto connect_timeout = u.get_duration("connect_timeout").value_or(std::chrono::seconds{2});
    const auto io_timeout = u.get_duration("command_timeout").value_or(std::chrono::seconds{2});
    const auto pool_size = u.get_int("pool_size", 1, 1024).value_or(128);
    pool_ = std::make_shared<client_pool>(make_handle(u, connect_timeout, io_timeout),
                                          static_cast<std::size_t>(pool_size), connect_timeout, io_timeout);
    // Reach every server once so a wrong address fails at open, as memcached:// does.
    auto h = pool_->borrow();
    memcached_version(h.get());
    for (uint32_t i = 0; i < memcached_server_count(h.get()); ++i) {
      const memcached_instance_st* s = memcached_server_instance_by_position(h.get(), i);
      if (memcached_server_major_version(s) == UINT8_MAX)
        throw error(errc::backend_unavailable, std::string(scheme) + ": cannot reach " + memcached_server_name(s) +
                                                   ":" + std::to_string(memcached_server_port(s)) + " of " +
                                                   u.redacted());
    }
  }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    check_ttl_fits(options.ttl, errc::invalid_argument, "lock '" + name + "':");
    auto keys = keys_for(prefix_, name);
    return std::make_unique<unsafe_delete_lock>(std::move(name), std::move(options), pool_, std::move(keys));
  }

 private:
  std::shared_ptr<client_pool> pool_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<backend> open_unsafe_delete(const uri& u, const lock_options& defaults) {
  return std::make_shared<unsafe_delete_backend>(u, defaults);
}

}  // namespace dlock::memcached
