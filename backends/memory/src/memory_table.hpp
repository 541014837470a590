#pragma once
// The lock table of one memory:// namespace: every grant, hold count and FIFO queue of waiters,
// guarded by one mutex. All backends opened on the same namespace share one table, so two lock
// objects of one process contend exactly as two processes would on a server.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lease_link.hpp"

namespace dlock::memory {

// What an acquisition hands back to the lock: enough to build the lease and to find the grant
// again on release and renew.
struct grant_ticket {
  std::uint64_t generation = 0;  // identifies the grant (not the hold): compare-and-delete key
  std::uint64_t token = 0;       // the fencing token of the grant
  std::shared_ptr<lease_link> link;
  std::chrono::steady_clock::time_point granted_at;  // the grant expires at granted_at + ttl
};

class table {
 public:
  using clock = std::chrono::steady_clock;

  // One attempt. nullopt: held by another owner, or others are queued (no barging).
  std::optional<grant_ticket> try_acquire(const std::string& name, const std::string& owner,
                                          std::chrono::milliseconds ttl);
  // Queues behind earlier waiters and sleeps on a per-waiter condition variable until granted
  // (FIFO hand-off) or until the deadline. nullopt: the deadline passed.
  std::optional<grant_ticket> acquire_until(const std::string& name, const std::string& owner,
                                            std::chrono::milliseconds ttl, clock::time_point deadline);
  // Drops one hold of grant `generation`; frees the grant at zero and hands it to the next
  // waiter. errc::not_owner when that grant is gone (expired, broken, or taken by someone else).
  void release(const std::string& name, std::uint64_t generation, const std::shared_ptr<lease_link>& link,
               std::error_code& ec);
  // Extends grant `generation` to at least now + ttl. errc::not_owner when the grant is gone.
  void renew(const std::string& name, std::uint64_t generation, std::chrono::milliseconds ttl, std::error_code& ec);

  // Test-only saboteur: frees the grant of `name` as if it had expired, marks every lease of it
  // lost (errc::lock_lost) and hands the lock to the next waiter. False if it was not held.
  bool break_grant(const std::string& name);
  // The server-side probe: is `name` granted right now (after applying expiry)?
  bool is_held(const std::string& name);
  // For tests: how many waiters are queued on `name` right now.
  std::size_t waiting(const std::string& name);

 private:
  struct waiter {
    std::string owner;
    std::chrono::milliseconds ttl;
    std::condition_variable wake;
    std::optional<grant_ticket> granted;  // set by whoever hands the lock over
  };
  struct grant {
    std::string owner;
    std::uint64_t generation = 0;
    std::uint64_t token = 0;
    clock::time_point expires_at;
    std::vector<std::shared_ptr<lease_link>> holds;  // one per live lease; the hold count
  };
  struct entry {
    std::optional<grant> held;
    std::deque<waiter*> queue;  // arrival order; waiters live on their own threads' stacks
  };

  grant_ticket grant_locked(entry& e, const std::string& owner, std::chrono::milliseconds ttl, clock::time_point now);
  grant_ticket join_locked(entry& e, std::chrono::milliseconds ttl, clock::time_point now);
  void free_locked(entry& e, clock::time_point now, std::error_code reason, lost_notes& notes);
  void expire_if_due_locked(entry& e, clock::time_point now, lost_notes& notes);
  void erase_if_idle_locked(const std::string& name);

  std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;  // only names with a grant or waiters
  // One counter per namespace: tokens increase across all names, hence strictly per name too,
  // and nothing per name has to be kept once its entry is idle.
  std::uint64_t last_token_ = 0;
  std::uint64_t last_generation_ = 0;
};

// The table of a namespace ("" is the default one, memory://). Namespaces live as long as the
// process, so fencing tokens never restart while it runs.
std::shared_ptr<table> table_for(const std::string& ns);

}  // namespace dlock::memory
