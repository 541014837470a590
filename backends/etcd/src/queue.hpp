#pragma once
// The wait of a reader-writer lock's side and of a semaphore's acquire, the mutex's wait in other
// words (etcd_lock.hpp): a lease per grant, one key put with it in a transaction that creates it
// only if absent, then looks at the line until the look says it holds. Between looks the waiter
// watches the deletion the look names (from the revision after the look's read), keeping its
// lease alive; a stop request or the deadline withdraws it by revoking the lease, its key with it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/lock_options.hpp"
#include "dlock/spi.hpp"
#include "gateway.hpp"

namespace dlock::etcd {

// Thrown by a look when our key is gone (our lease expired while we waited): we queue again.
struct place_lost {};

// What a look at the line found: granted, or the deletion to wait for before the next look.
struct queue_look {
  bool granted = false;
  std::string watch_key;        // a key, or the start of a range when watch_range_end is set
  std::string watch_range_end;  // empty: the key alone
  std::int64_t read_revision = 0;
};

// One kind of entry: its key and value, the reads of its creating transaction, its look.
class queue_entry {
 public:
  virtual ~queue_entry() = default;
  virtual std::string key_for(std::int64_t lease_id) const = 0;
  virtual std::string value() const = 0;
  // request_range operations the creating transaction runs after its put.
  virtual json checks() const = 0;
  // Throws dlock::error when the answers of checks() (from index 1 of `txn`) refuse us.
  virtual void check_created(const json& txn) const = 0;
  // Reads the line; throws place_lost when our key (`key`, created at revision `mine`) is gone.
  virtual queue_look look(gateway& gw, const std::string& key, std::int64_t mine) const = 0;
};

struct queue_context {
  std::shared_ptr<gateway> gw;
  std::string name;
  std::chrono::milliseconds ttl;
  backoff_policy poll;
};

// A try: one key, one look, withdrawn unless it holds.
std::unique_ptr<spi::lease_state> try_entry(const queue_context& q, const queue_entry& e, std::error_code& ec) noexcept;
// A wait until `deadline` (server outages waited out too, as the mutex's).
std::unique_ptr<spi::lease_state> wait_entry(const queue_context& q, const queue_entry& e,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::error_code& ec) noexcept;

// One transaction of `ranges` and a read of our own key (its answer last): throws place_lost when
// our key is no longer there at revision `mine`.
json read_line(gateway& gw, const std::vector<json>& ranges, const std::string& key, std::int64_t mine);

}  // namespace dlock::etcd
