#pragma once
// What a backend's server knows of a lock name, for operators: backend::inspect, backend::list
// and backend::force_release (see dlock/backend.hpp). Every field the server's layout does not
// record is left empty rather than guessed.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

// What a grant holds: the mutex, one side of a reader-writer lock, or `count` semaphore permits.
enum class hold_kind { mutex, read, write, permits };

std::string_view to_string(hold_kind kind) noexcept;

// One current grant of a name.
struct lock_holder {
  // The owner id the holder's lock object was made with (lock_options::owner; by default
  // "<host>:<pid>:<random>"), or what the server records in its place (a connection id, a
  // session id); empty when the server keeps no trace of who holds it.
  std::string owner;
  hold_kind kind = hold_kind::mutex;
  std::uint32_t count = 1;  // permits held (hold_kind::permits); 1 otherwise
  // When the grant was made, where the layout records it.
  std::optional<std::chrono::system_clock::time_point> since;
  // How long the grant has left unless renewed, where it expires at all.
  std::optional<std::chrono::milliseconds> ttl_left;
  std::optional<std::uint64_t> fencing_token;
};

// One request the server queues for a name (ZooKeeper sequential nodes, a fair queue's entries,
// SQL waiter rows, sessions waiting in pg_locks).
struct lock_waiter {
  std::string owner;  // empty when the server does not say whose request it is
  std::optional<hold_kind> kind;
};

struct lock_info {
  std::string name;
  bool held = false;
  std::vector<lock_holder> holders;
  // Meaningful only when waiters_known: a backend whose server queues nobody (its waiters poll)
  // cannot tell who is waiting.
  std::vector<lock_waiter> waiters;
  bool waiters_known = false;
};

}  // namespace dlock
