#pragma once
// memcached://'s counting semaphore: N permit slots, each an item taken exactly as the mutex takes
// its item (`add` with the ttl, the grant's random token as the value), released and renewed with
// the mutex's CAS-guarded store per slot. So a permit is exactly as safe as a lock of memcached://,
// with the same caveats (README: eviction, restart, no replication).
//
// Keys, all on the server the mapped name (`group`) hashes to:
//   <prefix>sem:<group>#permit<i>   slot i, 0 <= i < max_count: value = the holder's token
//   <prefix>semfence:<group>        the fencing base (as the mutex's <prefix>fence:<group>)
// "sem:" and "semfence:" differ from the mutex's "lock:" and "fence:" at their first bytes, and a
// slot key ends in "#permit" + digits after the last '#permit', so no two (kind, name, slot) share
// a key.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client_pool.hpp"
#include "dlock/spi.hpp"
#include "memcached_lease.hpp"
#include "orphan_sweeper.hpp"

namespace dlock::memcached {

struct semaphore_keys {
  std::string group;
  std::string slot_prefix;  // + std::to_string(i)
  std::string fence;
  // The key_layout of slot i, for the mutex's per-item commands (its `lock` is the slot's key).
  key_layout slot(std::uint32_t i) const { return {group, slot_prefix + std::to_string(i), fence, {}}; }
};
semaphore_keys semaphore_keys_for(std::string_view prefix, std::string_view name);

// One name, one lock. The mutex of a name (keys_for: <prefix>lock:<g>) and its semaphore never
// hold together. A semaphore records that the name is one: <prefix>sems:<g> on the mutex's
// server (the mutex's group g), value = its max_count, never expiring (an eviction loses it, as
// it loses a lock item), and each grant reads the mutex's item after taking its slots, with the
// record in place by then. The mutex reads the record in the `gets` that follows its `add`, and
// then counts the slots held. Of a mutex and a semaphore racing for one name at least one sees
// the other and gives its grant back (errc::name_conflict): never both granted.
// How many of the first `max_count` slots of `keys` are held (a multi-key `get`, 500 keys each).
std::optional<std::uint32_t> semaphore_permits_held(memcached_st* m, const semaphore_keys& keys,
                                                    std::uint32_t max_count, memcached_return_t& rc);

// One grant of k permits: k slot grants, each a memcached_lease (its own CAS-guarded release and
// renewal), released and renewed together. The fencing token: the name's base plus the largest
// CAS unique of the grant's slots (all on one server, whose CAS uniques only grow).
class memcached_semaphore_lease final : public spi::lease_state {
 public:
  memcached_semaphore_lease(std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until,
                            std::vector<std::unique_ptr<memcached_lease>> slots, std::uint64_t fence);

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }

 protected:
  // Every slot is released; not_owner when any of them was no longer ours.
  void do_release(std::error_code& ec) noexcept override;
  // Every slot renewed; the first failure is the lease's (not_owner: the core marks it lost).
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  std::vector<std::unique_ptr<memcached_lease>> slots_;
  std::uint64_t fence_;
};

class memcached_semaphore final : public semaphore {
 public:
  memcached_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps, lock_options options,
                      std::shared_ptr<client_pool> pool, std::shared_ptr<orphan_sweeper> sweeper,
                      const std::string& prefix, bool restart_delay);

 protected:
  // `add` of free slots from a random first one until `permits` are ours (one round trip per slot
  // tried; above scan_above slots, a `get` of all of them first picks the free ones), one `gets` of the taken slots and
  // the fencing base; fewer free: the taken ones are given back (CAS-guarded). memcached cannot queue or notify:
  // waiting is the core's polling.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override;
  // The core's polling, within the deadline whatever the servers do (acquire_deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override;

 private:
  // A semaphore of more slots reads which are taken (one multi-key `get` per 500) before its `add`s,
  // instead of trying each slot with an `add` round trip.
  static constexpr std::uint32_t scan_above = 8;
  // The slots to try with `add`, from a random first one: every slot, or above scan_above the ones
  // found free.
  std::vector<std::uint32_t> slots_to_try(memcached_st* m, std::error_code& ec) const;
  // Gives back slots we will not hand out: CAS-guarded deletes now, or by the sweeper later.
  void withdraw(memcached_st* m, const std::vector<std::uint32_t>& taken, const std::string& token,
                time_t exptime) const noexcept;

  // After the slots are ours: the mutex's item of the name, with the semaphore record in place
  // first (written when missing or below max_count). True when the mutex holds the name (then
  // the caller gives the slots back); false with ec when the server failed.
  bool mutex_holds(memcached_st* m, std::optional<item> lock, std::optional<item> record, std::error_code& ec) const;

  std::shared_ptr<client_pool> pool_;
  std::shared_ptr<orphan_sweeper> sweeper_;
  semaphore_keys keys_;
  key_layout mutex_keys_;  // the mutex's keys of the same name (its item and the semaphore record)
  bool restart_delay_;
};

}  // namespace dlock::memcached
