#include "memcached_lock.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "acquire_deadline.hpp"
#include "capabilities.hpp"
#include "grant_fence.hpp"
#include "memcached_lease.hpp"
#include "memcached_semaphore.hpp"

namespace dlock::memcached {

namespace {

std::string not_ours_message(std::string_view what, const std::string& name) {
  return "memcached: " + std::string(what) + " of '" + name +
         "': the lock is no longer ours (expired, evicted, deleted or replaced, and maybe taken by another owner)";
}

}  // namespace

memcached_lease::memcached_lease(std::shared_ptr<client_pool> pool, std::shared_ptr<memcached_renewals> renewals,
                                 key_layout keys, std::string token, std::string name, std::chrono::milliseconds ttl,
                                 clock::time_point valid_until, std::uint64_t fence, std::uint64_t cas)
    : lease_state(std::move(name), ttl, valid_until),
      pool_(std::move(pool)),
      renewals_(std::move(renewals)),
      keys_(std::move(keys)),
      token_(std::move(token)),
      fence_(fence),
      known_cas_(cas) {}

spi::renewal_batch* memcached_lease::batch() const noexcept { return renewals_.get(); }

void memcached_lease::do_release(std::error_code& ec) noexcept { store_if_ours(expired_exptime, "release", ec); }

void memcached_lease::do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  try {
    check_ttl_fits(ttl, errc::invalid_argument, "renewal of '" + name() + "':");
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
    return;
  }
  store_if_ours(exptime_for(ttl), "renew", ec);
}

bool memcached_lease::store_if_ours(time_t exptime, std::string_view what, std::error_code& ec) noexcept {
  try {
    auto h = pool_->borrow();
    memcached_return_t rc = MEMCACHED_SUCCESS;
    // Whatever happens next, the item's CAS unique changes (our store) or stops mattering.
    if (const auto cas = known_cas_.exchange(0); cas != 0) {
      switch (store_with_cas(h.get(), keys_, token_, exptime, cas, rc)) {
        case known_cas_store::stored: return true;
        case known_cas_store::gone: set_error(ec, errc::not_owner, not_ours_message(what, name())); return false;
        case known_cas_store::replaced: break;  // re-stored by a renewal of ours, or another owner's: compare the token
        case known_cas_store::failed:
          set_memcached_error(ec, h.get(), rc, std::string(what) + " of '" + name() + "'");
          return false;
      }
    }
    switch (memcached::store_if_ours(h.get(), keys_, token_, exptime, rc)) {
      case ownership::stored: return true;
      case ownership::not_ours: set_error(ec, errc::not_owner, not_ours_message(what, name())); return false;
      case ownership::failed: break;
    }
    set_memcached_error(ec, h.get(), rc, std::string(what) + " of '" + name() + "'");
    return false;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
    return false;
  }
}

namespace {

class memcached_lock final : public distributed_lock {
 public:
  memcached_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<client_pool> pool,
                 std::shared_ptr<orphan_sweeper> sweeper, std::shared_ptr<memcached_renewals> renewals, key_layout keys,
                 semaphore_keys semaphore, bool restart_delay)
      : distributed_lock(std::move(name), caps, std::move(options)),
        pool_(std::move(pool)),
        sweeper_(std::move(sweeper)),
        renewals_(std::move(renewals)),
        keys_(std::move(keys)),
        semaphore_(std::move(semaphore)),
        restart_delay_(restart_delay) {}

 protected:
  // Two round trips: `add` the grant, then one `gets` of the lock item (its CAS unique: the
  // release's compare-and-delete needs no `gets` of its own) and of the name's fencing base.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    try {
      auto h = pool_->borrow();
      io_bound bound(h.get(), pool_->connect_timeout(), pool_->io_timeout());  // inside an acquire's deadline
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
      bound.refresh();
      auto found = read_grant(h.get(), keys_, rc);
      if (rc != MEMCACHED_SUCCESS) {
        set_memcached_error(ec, h.get(), rc, "acquire of '" + std::string(name()) + "' (gets)");
        withdraw(h.get(), std::move(token), exptime);
        return nullptr;
      }
      // Our item is already gone (deleted or evicted in between): nothing to hand out.
      if (!found.lock || found.lock->value != token) return nullptr;
      // The name is recorded as a semaphore's (memcached_semaphore.hpp: one name, one lock): our
      // item is in place, so a permit taken from now on sees it; count those taken before.
      if (found.semaphores) {
        std::uint32_t recorded = 0;
        try {
          recorded = static_cast<std::uint32_t>(
              std::min<unsigned long long>(std::stoull(found.semaphores->value), max_semaphore_count));
        } catch (...) {
        }
        bound.refresh();
        const auto held = semaphore_permits_held(h.get(), semaphore_, recorded, rc);
        if (!held) {
          set_memcached_error(ec, h.get(), rc,
                              "acquire of '" + std::string(name()) + "' (get of its semaphore's permits)");
          withdraw(h.get(), std::move(token), exptime);
          return nullptr;
        }
        if (*held > 0) {
          withdraw(h.get(), std::move(token), exptime);
          set_error(ec, errc::name_conflict,
                    "lock '" + std::string(name()) + "' is in use as a semaphore (" + std::to_string(*held) +
                        (*held == 1 ? " permit" : " permits") +
                        " held on the server); a mutex of the same name cannot be taken: use another name");
          return nullptr;
        }
      }
      const auto cas = found.lock->cas;
      std::string base;
      bound.refresh();
      switch (fence_base(h.get(), keys_, name(), restart_delay_, ttl, cas, std::move(found.fence), base, ec)) {
        case fence_status::issued:
          if (const auto fence = fence_from(base, cas))
            return std::make_unique<memcached_lease>(pool_, renewals_, keys_, std::move(token), std::string(name()),
                                                     ttl, spi::lease_state::validity_after(start, ttl), *fence, cas);
          set_error(ec, errc::backend_error,
                    "memcached: fencing token of '" + std::string(name()) + "': the fencing base " + keys_.fence +
                        " holds no number this version can add the grant's CAS unique to");
          break;
        case fence_status::server_restarted_recently:
          withdraw(h.get(), std::move(token), exptime);
          return nullptr;  // contention: holders from before the restart may still be working
        case fence_status::failed: break;
      }
      withdraw(h.get(), std::move(token), exptime);  // a fencing lock never grants without a token
      return nullptr;
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
      return nullptr;
    }
  }

  // The core's wait, within the deadline whatever the servers do (acquire_deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec, [this](clock::time_point d, std::error_code& e) {
      return distributed_lock::do_acquire_until(d, e);
    });
  }

 private:
  // Takes back a grant we will not hand out: an owner-checked delete now, or by the sweeper once
  // the server answers again.
  void withdraw(memcached_st* m, std::string token, time_t exptime) const noexcept {
    // Bounded like the attempt (io_bound): what this cannot do in time, the sweeper does.
    const io_bound bound(m, pool_->connect_timeout(), pool_->io_timeout());
    memcached_return_t rc;
    if (store_if_ours(m, keys_, token, expired_exptime, rc) == ownership::failed)
      sweeper_->sweep(keys_, std::move(token), exptime);
  }

  std::shared_ptr<client_pool> pool_;
  std::shared_ptr<orphan_sweeper> sweeper_;
  std::shared_ptr<memcached_renewals> renewals_;
  key_layout keys_;
  semaphore_keys semaphore_;  // the semaphore of the same name, whose permits refuse this lock
  bool restart_delay_;
};

}  // namespace

memcached_backend::memcached_backend(const uri& u, const lock_options& defaults)
    : backend(memcached_caps, memcached_primitives, lock_scope::network, name_limits{}, defaults, u.redacted()),
      prefix_(u.get("prefix").value_or("dlock:")),
      restart_delay_(u.get_bool("restart_delay").value_or(true)) {
  const auto connect_timeout = u.get_duration("connect_timeout").value_or(std::chrono::seconds{2});
  const auto io_timeout = u.get_duration("command_timeout").value_or(std::chrono::seconds{2});
  const auto pool_size = u.get_int("pool_size", 1, 1024).value_or(128);
  check_ttl_fits(defaults.ttl, errc::invalid_uri, u.redacted() + ":");
  if (prefix_.size() > 64) throw error(errc::invalid_uri, u.redacted() + ": prefix must be at most 64 bytes");
  for (unsigned char c : prefix_)
    if (c <= 0x20 || c >= 0x7f)
      throw error(errc::invalid_uri, u.redacted() + ": prefix must be printable ASCII without spaces");
  pool_ = std::make_shared<client_pool>(make_handle(u, connect_timeout, io_timeout),
                                        static_cast<std::size_t>(pool_size), connect_timeout, io_timeout);
  sweeper_ = std::make_shared<orphan_sweeper>(pool_);
  renewals_ = std::make_shared<memcached_renewals>(pool_, connect_timeout, io_timeout);
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
  auto semaphore = semaphore_keys_for(prefix_, name);
  return std::make_unique<memcached_lock>(std::move(name), caps(), std::move(options), pool_, sweeper_, renewals_,
                                          std::move(keys), std::move(semaphore), restart_delay_);
}

std::unique_ptr<semaphore> memcached_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                                lock_options options) {
  check_ttl_fits(options.ttl, errc::invalid_argument, "semaphore '" + name + "':");
  return std::make_unique<memcached_semaphore>(std::move(name), max_count, semaphore_caps(), std::move(options), pool_,
                                               sweeper_, prefix_, restart_delay_);
}

lock_info memcached_backend::do_inspect(const std::string& name) {
  const auto keys = keys_for(prefix_, name);
  auto h = pool_->borrow();
  memcached_return_t rc = MEMCACHED_SUCCESS;
  const auto items = read_grant(h.get(), keys, rc);
  if (memcached_failed(rc)) {
    std::error_code ec;
    set_memcached_error(ec, h.get(), rc, "inspecting '" + name + "'");
    throw error(ec, last_error_message());
  }
  lock_info info;
  if (items.lock) {
    lock_holder holder;
    holder.owner = items.lock->value;  // the grant's token
    if (items.fence) holder.fencing_token = fence_from(items.fence->value, items.lock->cas);
    info.holders.push_back(std::move(holder));
  }
  return info;
}

std::vector<lock_holder> memcached_backend::do_force_release(const std::string& name) {
  const auto keys = keys_for(prefix_, name);
  auto info = do_inspect(name);
  if (info.holders.empty()) return {};
  auto h = pool_->borrow();
  memcached_return_t rc = MEMCACHED_SUCCESS;
  // Deletes the item only if it still carries the token read: a grant made since is left alone.
  const auto outcome = store_if_ours(h.get(), keys, info.holders.front().owner, expired_exptime, rc);
  if (outcome == ownership::failed) {
    std::error_code ec;
    set_memcached_error(ec, h.get(), rc, "breaking '" + name + "'");
    throw error(ec, last_error_message());
  }
  if (outcome == ownership::not_ours) return {};  // released or re-granted meanwhile
  return info.holders;
}

}  // namespace dlock::memcached
