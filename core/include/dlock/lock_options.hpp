#pragma once
// Per-lock options. Every duration is std::chrono. Defaults come from the URI query
// (?ttl=30s&watchdog=false&renew=5s&poll=10ms..800ms), and make_lock can override them per lock.
#include <chrono>
#include <optional>
#include <string>
#include <system_error>

namespace dlock {

// Jittered polling for backends that cannot wait on the server: each sleep is uniform in
// [min, max] (DistributedLock's default range), growing from min towards max exponentially so a
// short wait stays responsive and a long one does not hammer the server.
struct backoff_policy {
  std::chrono::milliseconds min{10};
  std::chrono::milliseconds max{800};
};

struct lock_options {
  // How long the server keeps a grant without renewal. Used only by expiring backends.
  std::chrono::milliseconds ttl{std::chrono::seconds{30}};
  // Renew in the background while the lease is held (renewable backends only).
  bool watchdog = true;
  // Renewal period; nullopt means ttl / 3 (Redisson's and DistributedLock's cadence).
  std::optional<std::chrono::milliseconds> renew_every;
  backoff_policy poll{};
  // Owner identity on the server. Empty: a fresh "<host>:<pid>:<128 random bits>" per lock object.
  // Two lock objects given the same owner are the same owner (reentrancy, release), across processes.
  std::string owner;
};

// What backend::make_lock requires of the options, checkable before any backend is opened (the
// CLI checks a command line before it connects): ttl from 1ms to longest_duration, renew shorter
// than the ttl, 0 < poll min <= max <= longest_duration. Sets ec to errc::invalid_argument and
// last_error_message() naming the first bad value; clears ec when all is well.
void check_lock_options(const lock_options& options, std::error_code& ec) noexcept;

}  // namespace dlock
