#include "memcached_semaphore.hpp"

#include <algorithm>
#include <random>

#include "acquire_deadline.hpp"
#include "grant_fence.hpp"

namespace dlock::memcached {

semaphore_keys semaphore_keys_for(std::string_view prefix, std::string_view name) {
  // The longest suffix: "sem:" before the group, "#permit" + the digits of the largest slot after.
  const std::size_t longest_suffix =
      std::string_view("sem:#permit").size() + std::to_string(max_semaphore_count - 1).size();
  const std::size_t room = max_key_bytes - prefix.size() - longest_suffix;
  semaphore_keys k;
  k.group = spi::safe_key(
      name, room, [](unsigned char c) { return c > 0x20 && c < 0x7f; }, "#");
  k.slot_prefix = std::string(prefix) + "sem:" + k.group + "#permit";
  k.fence = std::string(prefix) + "semfence:" + k.group;
  return k;
}

memcached_semaphore_lease::memcached_semaphore_lease(std::string name, std::chrono::milliseconds ttl,
                                                     clock::time_point valid_until,
                                                     std::vector<std::unique_ptr<memcached_lease>> slots,
                                                     std::uint64_t fence)
    : lease_state(std::move(name), ttl, valid_until), slots_(std::move(slots)), fence_(fence) {}

void memcached_semaphore_lease::do_release(std::error_code& ec) noexcept {
  for (auto& slot : slots_) {
    std::error_code one;
    slot->release(one);
    // not_owner outranks a network error: it is the answer the caller must act on.
    if (one && (!ec || one == errc::not_owner)) ec = one;
  }
}

void memcached_semaphore_lease::do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  for (auto& slot : slots_) {
    slot->renew(ttl, ec);
    if (ec) return;  // one permit gone: the grant is not what was acquired any more
  }
}

memcached_semaphore::memcached_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps,
                                         lock_options options, std::shared_ptr<client_pool> pool,
                                         std::shared_ptr<orphan_sweeper> sweeper, const std::string& prefix,
                                         bool restart_delay)
    : semaphore(name, max_count, caps, std::move(options)),
      pool_(std::move(pool)),
      sweeper_(std::move(sweeper)),
      keys_(semaphore_keys_for(prefix, name)),
      mutex_keys_(keys_for(prefix, name)),
      restart_delay_(restart_delay) {}

namespace {

// Gets every permit slot of a semaphore of `max_count` (in batches of short command lines) and
// calls `held(index)` for each slot that is there. MEMCACHED_SUCCESS, or the first failure.
template <class Held>
memcached_return_t for_each_held_slot(memcached_st* m, const semaphore_keys& keys, std::uint32_t max_count,
                                      Held&& held) {
  constexpr std::uint32_t keys_per_get = 500;
  for (std::uint32_t from = 0; from < max_count; from += keys_per_get) {
    std::vector<std::string> batch;
    for (std::uint32_t i = from; i < std::min(max_count, from + keys_per_get); ++i)
      batch.push_back(keys.slot_prefix + std::to_string(i));
    std::vector<const char*> ptrs;
    std::vector<size_t> lengths;
    for (const auto& k : batch) {
      ptrs.push_back(k.data());
      lengths.push_back(k.size());
    }
    const auto rc =
        memcached_mget_by_key(m, keys.group.data(), keys.group.size(), ptrs.data(), lengths.data(), ptrs.size());
    if (memcached_failed(rc)) return rc;
    memcached_result_st* r = nullptr;
    memcached_return_t frc = MEMCACHED_SUCCESS;
    while ((r = memcached_fetch_result(m, nullptr, &frc)) != nullptr) {
      const std::string_view key(memcached_result_key_value(r), memcached_result_key_length(r));
      if (key.starts_with(keys.slot_prefix)) {
        const auto index = std::stoul(std::string(key.substr(keys.slot_prefix.size())));
        if (index < max_count) held(static_cast<std::uint32_t>(index));
      }
      memcached_result_free(r);
    }
    if (frc != MEMCACHED_END && frc != MEMCACHED_SUCCESS && frc != MEMCACHED_NOTFOUND) return frc;
  }
  return MEMCACHED_SUCCESS;
}

}  // namespace

std::optional<std::uint32_t> semaphore_permits_held(memcached_st* m, const semaphore_keys& keys,
                                                    std::uint32_t max_count, memcached_return_t& rc) {
  std::uint32_t held = 0;
  rc = for_each_held_slot(m, keys, max_count, [&](std::uint32_t) { ++held; });
  if (rc != MEMCACHED_SUCCESS) return std::nullopt;
  return held;
}

bool memcached_semaphore::mutex_holds(memcached_st* m, std::optional<item> lock, std::optional<item> record,
                                      std::error_code& ec) const {
  const std::string what = "acquire of semaphore '" + std::string(name()) + "'";
  memcached_return_t rc = MEMCACHED_SUCCESS;
  for (int attempt = 0;; ++attempt) {
    std::uint64_t recorded = 0;
    if (record) {
      try {
        recorded = std::stoull(record->value);
      } catch (...) {
      }
    }
    if (record && recorded >= max_count()) return lock.has_value();
    if (attempt == 3) {
      set_error(ec, errc::backend_error,
                "memcached: " + what + ": its record " + mutex_keys_.semaphores + " keeps changing");
      return false;
    }
    // Missing (a first use, an eviction) or below our max_count: write it, then read the mutex's
    // item again, after the record is in place.
    const std::string value = std::to_string(max_count());
    const auto& k = mutex_keys_;
    rc = record ? memcached_cas_by_key(m, k.group.data(), k.group.size(), k.semaphores.data(), k.semaphores.size(),
                                       value.data(), value.size(), 0, 0, record->cas)
                : memcached_add_by_key(m, k.group.data(), k.group.size(), k.semaphores.data(), k.semaphores.size(),
                                       value.data(), value.size(), 0, 0);
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED && rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS &&
        rc != MEMCACHED_NOTFOUND) {
      set_memcached_error(ec, m, rc, what + " (its record " + k.semaphores + ")");
      return false;
    }
    auto found = read_grant(m, k, rc);  // the mutex's item and the record, as they are now
    if (rc != MEMCACHED_SUCCESS) {
      set_memcached_error(ec, m, rc, what + " (gets " + k.lock + ")");
      return false;
    }
    lock = std::move(found.lock);
    record = std::move(found.semaphores);
  }
}

void memcached_semaphore::withdraw(memcached_st* m, const std::vector<std::uint32_t>& taken, const std::string& token,
                                   time_t exptime) const noexcept {
  // Bounded like the attempt (io_bound): what this cannot do in time, the sweeper does.
  const io_bound bound(m, pool_->connect_timeout(), pool_->io_timeout());
  for (const auto i : taken) {
    try {
      const auto slot = keys_.slot(i);
      memcached_return_t rc;
      if (store_if_ours(m, slot, token, expired_exptime, rc) == ownership::failed)
        sweeper_->sweep(slot, token, exptime);
    } catch (...) {
      // allocation failure: the slot expires with its ttl
    }
  }
}

std::vector<std::uint32_t> memcached_semaphore::slots_to_try(memcached_st* m, std::error_code& ec) const {
  // From a random first slot: concurrent acquirers spread over the slots instead of all trying 0 first.
  thread_local std::minstd_rand spread{std::random_device{}()};
  const std::uint32_t first = static_cast<std::uint32_t>(spread() % max_count());
  std::vector<bool> taken(max_count(), false);
  if (max_count() > scan_above) {
    // One `get` of every slot (in batches of short command lines) instead of an `add` per slot.
    const auto rc = for_each_held_slot(m, keys_, max_count(), [&](std::uint32_t i) { taken[i] = true; });
    if (rc != MEMCACHED_SUCCESS) {
      set_memcached_error(ec, m, rc, "acquire of semaphore '" + std::string(name()) + "' (get of its permits)");
      return {};
    }
  }
  std::vector<std::uint32_t> order;
  for (std::uint32_t n = 0; n < max_count(); ++n) {
    const std::uint32_t i = (first + n) % max_count();
    if (!taken[i]) order.push_back(i);
  }
  return order;
}

std::unique_ptr<spi::lease_state> memcached_semaphore::do_acquire_until(std::uint32_t permits,
                                                                        clock::time_point deadline,
                                                                        std::error_code& ec) noexcept {
  return wait_out_outages(deadline, options().poll, ec, [&](clock::time_point d, std::error_code& e) {
    return semaphore::do_acquire_until(permits, d, e);
  });
}

std::unique_ptr<spi::lease_state> memcached_semaphore::do_try_acquire(std::uint32_t permits,
                                                                      std::error_code& ec) noexcept {
  try {
    auto h = pool_->borrow();
    memcached_st* m = h.get();
    io_bound bound(m, pool_->connect_timeout(), pool_->io_timeout());  // inside an acquire's deadline
    const auto ttl = options().ttl;
    const auto exptime = exptime_for(ttl);
    const auto start = clock::now();
    // One token for every slot of this grant: each slot is checked against it as the mutex's item.
    const std::string token = spi::random_token();
    const auto order = slots_to_try(m, ec);  // bounded by `bound` as set above
    if (ec) return nullptr;
    std::vector<std::uint32_t> taken;
    for (std::size_t n = 0; n < order.size() && taken.size() < permits; ++n) {
      const std::uint32_t i = order[n];
      const auto key = keys_.slot_prefix + std::to_string(i);
      bound.refresh();
      const auto rc = memcached_add_by_key(m, keys_.group.data(), keys_.group.size(), key.data(), key.size(),
                                           token.data(), token.size(), exptime, 0);
      if (rc == MEMCACHED_NOTSTORED || rc == MEMCACHED_DATA_EXISTS) continue;  // held
      if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_STORED) {
        set_memcached_error(
            ec, m, rc, "acquire of semaphore '" + std::string(name()) + "' (add of permit " + std::to_string(i) + ")");
        // The request may have been stored and only its reply lost: no permit may stay behind.
        if (is_network_failure(rc)) sweeper_->sweep(keys_.slot(i), token, exptime);
        withdraw(m, taken, token, exptime);
        return nullptr;
      }
      taken.push_back(i);
    }
    if (taken.size() < permits) {  // not enough free: all or none
      withdraw(m, taken, token, exptime);
      return nullptr;
    }
    // One `gets` of the taken slots (their CAS uniques) and of the fencing base, and, when they
    // are on the same server (names that need no hashing), of the mutex's item and the record.
    std::vector<std::string> keys;
    for (const auto i : taken) keys.push_back(keys_.slot_prefix + std::to_string(i));
    keys.push_back(keys_.fence);
    const bool one_server = mutex_keys_.group == keys_.group;
    if (one_server) {
      keys.push_back(mutex_keys_.lock);
      keys.push_back(mutex_keys_.semaphores);
    }
    std::vector<const char*> key_ptrs;
    std::vector<size_t> lengths;
    for (const auto& k : keys) {
      key_ptrs.push_back(k.data());
      lengths.push_back(k.size());
    }
    bound.refresh();
    auto rc = memcached_mget_by_key(m, keys_.group.data(), keys_.group.size(), key_ptrs.data(), lengths.data(),
                                    key_ptrs.size());
    std::vector<std::optional<item>> found(keys.size());
    if (!memcached_failed(rc)) {
      memcached_result_st* r = nullptr;
      memcached_return_t frc = MEMCACHED_SUCCESS;
      while ((r = memcached_fetch_result(m, nullptr, &frc)) != nullptr) {
        const std::string_view key(memcached_result_key_value(r), memcached_result_key_length(r));
        for (std::size_t j = 0; j < keys.size(); ++j)
          if (keys[j] == key)
            found[j] =
                item{std::string(memcached_result_value(r), memcached_result_length(r)), memcached_result_cas(r)};
        memcached_result_free(r);
      }
      rc = (frc == MEMCACHED_END || frc == MEMCACHED_SUCCESS || frc == MEMCACHED_NOTFOUND) ? MEMCACHED_SUCCESS : frc;
    }
    if (rc != MEMCACHED_SUCCESS) {
      set_memcached_error(ec, m, rc, "acquire of semaphore '" + std::string(name()) + "' (gets)");
      withdraw(m, taken, token, exptime);
      return nullptr;
    }
    std::optional<item> mutex_item, record;
    if (one_server) {
      record = std::move(found.back());
      found.pop_back();
      mutex_item = std::move(found.back());
      found.pop_back();
    } else {
      auto other = read_grant(m, mutex_keys_, rc);
      if (rc != MEMCACHED_SUCCESS) {
        set_memcached_error(ec, m, rc,
                            "acquire of semaphore '" + std::string(name()) + "' (gets " + mutex_keys_.lock + ")");
        withdraw(m, taken, token, exptime);
        return nullptr;
      }
      mutex_item = std::move(other.lock);
      record = std::move(other.semaphores);
    }
    bound.refresh();
    const bool refused = mutex_holds(m, std::move(mutex_item), std::move(record), ec);
    if (refused || ec) {
      withdraw(m, taken, token, exptime);
      if (refused)
        set_error(ec, errc::name_conflict,
                  "lock '" + std::string(name()) +
                      "' is in use as a mutex (held on the server); a semaphore of the same name cannot be taken: use "
                      "another name");
      return nullptr;
    }
    std::uint64_t newest_cas = 0;
    for (std::size_t j = 0; j < taken.size(); ++j) {
      // A slot already gone (evicted or deleted in between): nothing to hand out.
      if (!found[j] || found[j]->value != token) {
        withdraw(m, taken, token, exptime);
        return nullptr;
      }
      newest_cas = std::max(newest_cas, found[j]->cas);
    }
    std::string base;
    bound.refresh();
    const key_layout fence_keys{keys_.group, keys_.slot_prefix, keys_.fence, {}};
    switch (fence_base(m, fence_keys, name(), restart_delay_, ttl, newest_cas, std::move(found.back()), base, ec)) {
      case fence_status::issued:
        if (const auto fence = fence_from(base, newest_cas)) {
          const auto valid_until = spi::lease_state::validity_after(start, ttl);
          std::vector<std::unique_ptr<memcached_lease>> slots;
          for (std::size_t j = 0; j < taken.size(); ++j)
            slots.push_back(std::make_unique<memcached_lease>(pool_, nullptr, keys_.slot(taken[j]), token,
                                                              std::string(name()), ttl, valid_until, *fence,
                                                              found[j]->cas));
          return std::make_unique<memcached_semaphore_lease>(std::string(name()), ttl, valid_until, std::move(slots),
                                                             *fence);
        }
        set_error(ec, errc::backend_error,
                  "memcached: fencing token of semaphore '" + std::string(name()) + "': the fencing base " +
                      keys_.fence + " holds no number this version can add the grant's CAS unique to");
        break;
      case fence_status::server_restarted_recently:
        withdraw(m, taken, token, exptime);
        return nullptr;  // contention: holders from before the restart may still be working
      case fence_status::failed: break;
    }
    withdraw(m, taken, token, exptime);  // never a grant without its token
    return nullptr;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_unavailable, std::string("memcached: ") + e.what());
    return nullptr;
  }
}

}  // namespace dlock::memcached
