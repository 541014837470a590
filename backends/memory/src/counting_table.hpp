#pragma once
// The table of memory://'s reader-writer locks and semaphores in one namespace: each name is a
// pool of units that grants take a share of. A semaphore of N permits is a pool of N units, a
// permit one unit; a reader-writer lock is a pool of `rw_capacity` units, a reader takes one and
// a writer all of them. Waiters queue in arrival order and the head blocks everyone behind it, so
// a waiting writer holds back the readers that come after it (writer preference, and FIFO
// fairness for both), and a release grants as many queued waiters in a row as now fit (every
// reader queued behind a leaving writer, up to the next writer).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "lease_link.hpp"

namespace dlock::memory {

// A reader-writer lock's pool: more readers than any process can hold.
inline constexpr std::uint64_t rw_capacity = std::uint64_t{1} << 40;

// What a grant hands back: enough to build the lease and to find the grant again.
struct unit_ticket {
  std::uint64_t id = 0;     // this grant, among the name's holders
  std::uint64_t token = 0;  // its fencing token: increasing over every grant of the namespace
  std::shared_ptr<lease_link> link;
  std::chrono::steady_clock::time_point granted_at;
};

class counting_table {
 public:
  using clock = std::chrono::steady_clock;

  // One attempt to take `units` of the pool `name` of `capacity` units. nullopt: not enough free,
  // or others queued first. errc::invalid_argument when the pool is in use with another capacity
  // (two processes disagreeing on a semaphore's max_count).
  std::optional<unit_ticket> try_acquire(const std::string& name, std::uint64_t capacity, std::uint64_t units,
                                         std::chrono::milliseconds ttl, std::error_code& ec);
  // Queues behind earlier waiters until granted or the deadline (nullopt).
  std::optional<unit_ticket> acquire_until(const std::string& name, std::uint64_t capacity, std::uint64_t units,
                                           std::chrono::milliseconds ttl, clock::time_point deadline,
                                           std::error_code& ec);
  // Gives grant `id` back. errc::not_owner when it is gone (expired, or broken by a test).
  void release(const std::string& name, std::uint64_t id, std::error_code& ec);
  // Extends grant `id` to at least now + ttl. errc::not_owner when it is gone.
  void renew(const std::string& name, std::uint64_t id, std::chrono::milliseconds ttl, std::error_code& ec);

  // Test-only saboteur: frees every grant of `name` as if expired, marking their leases lost.
  // Returns how many it freed.
  std::size_t break_grants(const std::string& name);
  // How many grants of `name` are live right now (after applying expiry).
  std::size_t holders(const std::string& name);

 private:
  struct holder {
    std::uint64_t id;
    std::uint64_t units;
    clock::time_point expires_at;
    std::shared_ptr<lease_link> link;
  };
  struct waiter {
    std::uint64_t units;
    std::chrono::milliseconds ttl;
    std::condition_variable wake;
    std::optional<unit_ticket> granted;
  };
  struct entry {
    std::uint64_t capacity = 0;
    std::uint64_t used = 0;
    std::vector<holder> holders;
    std::deque<waiter*> queue;  // arrival order; waiters live on their own threads' stacks
  };

  // The entry of `name`, checked against `capacity` (nullptr and ec set on a mismatch).
  entry* entry_for_locked(const std::string& name, std::uint64_t capacity, std::error_code& ec);
  unit_ticket grant_locked(entry& e, std::uint64_t units, std::chrono::milliseconds ttl, clock::time_point now);
  // Grants queued waiters in arrival order while the head fits (after units were freed).
  void hand_on_locked(entry& e, clock::time_point now);
  void expire_due_locked(entry& e, clock::time_point now, lost_notes& notes);
  void erase_if_idle_locked(const std::string& name);

  std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;  // only names with holders or waiters
  std::uint64_t last_id_ = 0;
};

// The namespace's table of reader-writer locks, and of semaphores (two tables: a reader-writer
// lock and a semaphore of one name are different objects, as they are on a server).
std::shared_ptr<counting_table> rw_table_for(const std::string& ns);
std::shared_ptr<counting_table> semaphore_table_for(const std::string& ns);

}  // namespace dlock::memory
