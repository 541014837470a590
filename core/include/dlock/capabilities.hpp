#pragma once
// Capabilities are declared data: a backend states them when it registers, open(uri, required)
// refuses early, and the conformance suite asserts each one both ways (present and absent).
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace dlock {

enum class capability : std::uint32_t {
  reentrant = 1u << 0,          // the same lock object may acquire again while it holds
  fair = 1u << 1,               // waiters are granted in arrival order
  blocking = 1u << 2,           // the server queues waiters: no client polling
  expiring = 1u << 3,           // a dead holder's lock frees itself (after ttl or session loss)
  renewable = 1u << 4,          // lease::renew extends the grant
  fencing = 1u << 5,            // lease::fencing_token strictly increases per grant
  lost_notification = 1u << 6,  // lease::lost_token fires when the grant is gone
  // The primitives beside the mutex. A backend's caps() has these when it makes them; what their
  // leases can do (the bits above) is in backend::rw_caps() and backend::semaphore_caps().
  read_write = 1u << 7,        // backend::make_rw_lock: many readers or one writer
  semaphore = 1u << 8,         // backend::make_semaphore: at most N permits held at once
  writer_preferred = 1u << 9,  // a waiting writer holds back new readers: no writer starvation
  // multi_lock (backend::make_multi_lock) tries a whole set in one round trip, all or none at once:
  // no other client ever sees part of the set taken by a try that fails.
  atomic_set = 1u << 10,
};

inline constexpr capability all_capabilities[] = {
    capability::reentrant,         capability::fair,       capability::blocking,
    capability::expiring,          capability::renewable,  capability::fencing,
    capability::lost_notification, capability::read_write, capability::semaphore,
    capability::writer_preferred,  capability::atomic_set};

std::string_view to_string(capability c) noexcept;

class capabilities {
 public:
  constexpr capabilities() noexcept = default;
  constexpr capabilities(std::initializer_list<capability> cs) noexcept {
    for (capability c : cs) bits_ |= static_cast<std::uint32_t>(c);
  }
  constexpr bool has(capability c) const noexcept { return (bits_ & static_cast<std::uint32_t>(c)) != 0; }
  constexpr bool has_all(capabilities wanted) const noexcept { return missing(wanted).empty(); }
  // The capabilities in `wanted` that this set lacks.
  constexpr capabilities missing(capabilities wanted) const noexcept { return capabilities(wanted.bits_ & ~bits_); }
  constexpr capabilities with(capability c) const noexcept {
    return capabilities(bits_ | static_cast<std::uint32_t>(c));
  }
  constexpr capabilities without(capability c) const noexcept {
    return capabilities(bits_ & ~static_cast<std::uint32_t>(c));
  }
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr std::uint32_t bits() const noexcept { return bits_; }
  friend constexpr bool operator==(capabilities, capabilities) noexcept = default;

  std::string to_string() const;  // "expiring|renewable|fencing", or "none"
  // Parses the to_string() form (also accepts ',' as a separator); throws dlock::error(invalid_argument).
  static capabilities parse(std::string_view text);

 private:
  constexpr explicit capabilities(std::uint32_t bits) noexcept : bits_(bits) {}
  std::uint32_t bits_ = 0;
};

// What a backend offers beside the mutex, declared as data like the mutex's capabilities: each
// primitive's own set (blocking, fair, expiring, renewable, fencing, lost_notification, and for
// the reader-writer lock writer_preferred), or nullopt when the backend does not make it.
struct primitive_caps {
  std::optional<capabilities> rw_lock;
  std::optional<capabilities> semaphore;
};

// `mutex_caps` with the offer bits of `primitives` added: read_write and semaphore for each
// primitive offered, writer_preferred where the reader-writer lock prefers writers.
constexpr capabilities with_primitives(capabilities mutex_caps, const primitive_caps& primitives) noexcept {
  if (primitives.rw_lock) {
    mutex_caps = mutex_caps.with(capability::read_write);
    if (primitives.rw_lock->has(capability::writer_preferred))
      mutex_caps = mutex_caps.with(capability::writer_preferred);
  }
  if (primitives.semaphore) mutex_caps = mutex_caps.with(capability::semaphore);
  return mutex_caps;
}

// Where exclusion holds. Not a capability (every backend excludes within its scope), but the
// suite needs it: a process-scoped lock must NOT exclude another process, and a test shows that.
enum class lock_scope { process, host, network };
std::string_view to_string(lock_scope s) noexcept;

}  // namespace dlock
