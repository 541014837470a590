#pragma once
// The lock table of one memory:// namespace: every grant, hold count and FIFO queue of waiters of
// every name, guarded by one mutex. All backends opened on the same namespace share one table, so
// two lock objects of one process contend exactly as two processes would on a server.
//
// One name, one lock: the mutex, the reader-writer lock and the semaphore of a name are one entry.
// The entry is a pool of units that grants take a share of. For the mutex and the reader-writer
// lock the pool has `rw_capacity` units: a reader takes one, a writer all of them, and the mutex
// is a writer (all of them) that its owner may re-enter. So a mutex excludes readers and writers
// and they exclude it, every kind waits in the one FIFO queue of the name (a waiting mutex or
// writer holds back the readers behind it, and any release wakes whoever can now go, whatever its
// kind), and all grants count on the namespace's one token counter. A semaphore of N permits is
// a pool of N units, a permit one unit; while a name's pool is held as one use (mutex or
// reader-writer lock, or semaphore) a request of the other is refused with errc::name_conflict,
// at once, and never queues.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "dlock/inspection.hpp"
#include "lease_link.hpp"

namespace dlock::memory {

// A reader-writer lock's (and mutex's) pool: more readers than any process can hold.
inline constexpr std::uint64_t rw_capacity = std::uint64_t{1} << 40;

// What a request is for. The first two share a pool; a semaphore's pool is of its own kind.
enum class use { mutex, reader_writer, semaphore };

struct request {
  use kind = use::mutex;
  std::uint64_t capacity = rw_capacity;  // a semaphore's max_count; rw_capacity otherwise
  std::uint64_t units = rw_capacity;     // a reader 1, a writer and the mutex all, a semaphore its permits
  const std::string* owner = nullptr;    // the lock object's owner id; a mutex's re-entry joins its grant
  std::chrono::milliseconds ttl{};

  static request mutex(const std::string& owner, std::chrono::milliseconds ttl) {
    return {use::mutex, rw_capacity, rw_capacity, &owner, ttl};
  }
  static request read_write(const std::string& owner, bool write, std::chrono::milliseconds ttl) {
    return {use::reader_writer, rw_capacity, write ? rw_capacity : 1, &owner, ttl};
  }
  static request permits(const std::string& owner, std::uint64_t max_count, std::uint64_t n,
                         std::chrono::milliseconds ttl) {
    return {use::semaphore, max_count, n, &owner, ttl};
  }
};

// What a grant (or a mutex's re-entry) hands back: enough to build the lease and to find the grant
// again on release and renew.
struct ticket {
  std::uint64_t id = 0;     // the grant, among the name's holders (a re-entry shares it)
  std::uint64_t token = 0;  // its fencing token: increasing over every grant of the namespace
  std::shared_ptr<lease_link> link;
  std::chrono::steady_clock::time_point granted_at;  // the grant expires at granted_at + ttl
};

class table {
 public:
  using clock = std::chrono::steady_clock;

  // One attempt. nullopt with !ec: not enough free, or others queued first (no barging; the
  // mutex's owner re-entering its own grant is not barging). errc::name_conflict when the name
  // is held as the other use, or as a semaphore of another max_count.
  std::optional<ticket> try_acquire(const std::string& name, const request& r, std::error_code& ec);
  // One attempt at every name of a set for one request (a multi_lock's mutexes), under one hold
  // of the table's mutex: a ticket for each name, in order, or nullopt and nothing taken. ec as
  // try_acquire's, for the first name that refuses.
  std::optional<std::vector<ticket>> try_acquire_all(std::span<const std::string* const> names, const request& r,
                                                     std::error_code& ec);
  // Queues behind earlier waiters and sleeps on a per-waiter condition variable until granted
  // (FIFO hand-off) or until the deadline (nullopt). Refused as try_acquire, without queueing.
  std::optional<ticket> acquire_until(const std::string& name, const request& r, clock::time_point deadline,
                                      std::error_code& ec);
  // Drops the hold `link` of grant `id`; the grant is freed when its last hold goes (a mutex's
  // re-entries are holds of one grant), and the waiters that now fit are granted.
  // errc::not_owner when the grant is gone (expired, or broken by a test).
  void release(const std::string& name, std::uint64_t id, const std::shared_ptr<lease_link>& link, std::error_code& ec);
  // Extends grant `id` to at least now + ttl (never shortens it). errc::not_owner when it is gone.
  void renew(const std::string& name, std::uint64_t id, std::chrono::milliseconds ttl, std::error_code& ec);

  // Test-only saboteur: frees every grant of `name` as if expired, marks their leases lost
  // (errc::lock_lost) and hands the name on to the waiters. Returns how many grants it freed.
  std::size_t break_grants(const std::string& name);
  // The server-side probe: how many grants of `name` are live right now (after applying expiry).
  std::size_t holders(const std::string& name);
  // For tests: how many waiters are queued on `name` right now.
  std::size_t waiting(const std::string& name);

  // backend::inspect: the grants and the queue of `name` (after applying expiry).
  lock_info inspect(const std::string& name);
  // backend::list: the names with live grants that start with `prefix`.
  std::vector<std::string> held_names(const std::string& prefix);
  // backend::force_release: break_grants, returning whom it removed.
  std::vector<lock_holder> force_release(const std::string& name);

 private:
  struct holder {
    std::uint64_t id;
    std::uint64_t units;
    clock::time_point expires_at;
    std::string owner;  // the lock object's owner id (a mutex's re-entry is matched on it)
    bool mutex;
    std::chrono::system_clock::time_point since;     // for inspection only
    std::vector<std::shared_ptr<lease_link>> holds;  // one per live lease: a mutex's re-entries
  };
  struct waiter {
    const request& asked;
    std::condition_variable_any wake;
    std::optional<ticket> granted;  // set by whoever hands the units over
  };
  struct entry {
    use kind = use::mutex;  // mutex and reader_writer both mean the lock's pool
    std::uint64_t capacity = 0;
    std::uint64_t used = 0;
    std::vector<holder> holders;
    std::deque<waiter*> queue;  // arrival order; waiters live on their own threads' stacks
  };

  // The entry of `name` for request `r`: nullptr with ec set when it is held as the other use or
  // as a semaphore of another size.
  entry* entry_for_locked(const std::string& name, const request& r, std::error_code& ec);
  // One attempt on an entry whose expired grants were freed: a re-entry, a grant, or nullopt.
  std::optional<ticket> attempt_locked(entry& e, const request& r, clock::time_point now);
  // Whether attempt_locked would give a ticket: a re-entry, or free units and nobody queued.
  static bool would_grant_locked(const entry& e, const request& r);
  ticket grant_locked(entry& e, const request& r, clock::time_point now);
  // Grants queued waiters in arrival order while the head fits (after units were freed).
  void hand_on_locked(entry& e, clock::time_point now);
  void free_locked(entry& e, std::vector<holder>::iterator h, clock::time_point now);
  void expire_due_locked(entry& e, clock::time_point now, lost_notes& notes);
  void erase_if_idle_locked(const std::string& name);
  // Under the mutex, `look(entry*, now)` on the entry of `name` with its due expiries freed
  // (nullptr when there is none); then an idle entry is dropped, and the losses those expiries
  // caused are delivered after the mutex is let go.
  template <class Look>
  void with_entry(const std::string& name, Look&& look);
  static lock_holder describe(const entry& e, const holder& h, clock::time_point now);

  std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;  // only names with holders or waiters
  // One counter per namespace for grant ids and fencing tokens: tokens increase across all names
  // and kinds, hence strictly per name too, and nothing per name has to be kept once its entry is
  // idle.
  std::uint64_t last_token_ = 0;
};

// The table of a namespace ("" is the default one, memory://). Namespaces live as long as the
// process, so fencing tokens never restart while it runs.
std::shared_ptr<table> table_for(const std::string& ns);

}  // namespace dlock::memory
