#pragma once
// Everything a backend author needs, and nothing a lock user needs. A backend provides:
//   - a distributed_lock subclass implementing do_try_acquire (and do_acquire_until where the
//     server queues waiters, or do_watch_release where it can only say that a lock was freed),
//   - an spi::lease_state subclass implementing do_release (compare-and-delete) and do_renew,
//   - a backend subclass implementing do_make_lock,
//   - `void register_<name>(dlock::registry&)` in its src/register.cpp,
// and gets waiting, backoff, the watchdog, name checks and error translation from the core.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/backend.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "dlock/registry.hpp"
#include "dlock/release_watch.hpp"
#include "dlock/uri.hpp"

namespace dlock::spi {

// 128 random bits from the OS as 32 lower-case hex digits: lock tokens, owner ids.
std::string random_token();
// A fresh random_token() in the 8-4-4-4-12 layout of a UUID's text form, for the servers' formats
// that other clients read as a UUID: Curator's protected node prefix, Redisson's client id.
std::string random_uuid();
// "<hostname>:<pid>:<random_token>": the default owner id of a lock object.
std::string default_owner_id();
// SHA-256 of `data` as 64 lower-case hex digits (OpenSSL's libcrypto).
std::string sha256_hex(std::string_view data);
// First 8 bytes of SHA-256, big-endian, as a signed 64-bit key (PostgreSQL advisory locks).
std::int64_t sha256_int64(std::string_view data);

// Maps a lock name to a key a server can store, without ever letting two distinct names collide.
// A name of at most `max_key_length` bytes, every byte of which `allowed` accepts, and which
// does not start with `hashed_prefix`, is used as it is. Any other name becomes
//   hashed_prefix + <the allowed leading bytes, cut short> + '.' + sha256_hex(name)
// which always starts with hashed_prefix, so it cannot equal a name used as it is; two hashed
// keys collide only if SHA-256 does. Requires max_key_length >= hashed_prefix.size() + 65.
std::string safe_key(std::string_view name, std::size_t max_key_length,
                     const std::function<bool(unsigned char)>& allowed, std::string_view hashed_prefix = "#");

// The jittered, exponentially growing sleep for attempt `attempt` (0-based) of a polling wait.
std::chrono::milliseconds backoff_delay(const backoff_policy& policy, unsigned attempt);

// One statically linked backend in the link-time list default_registry() walks. dlock_add_backend
// generates one per backend (cmake/backend_entry.cpp.in); a backend author never writes one.
struct builtin_backend {
  void (*register_backend)(registry&);
};

}  // namespace dlock::spi

// In a backend built as a shared module: exports the entry point registry::load_plugin calls.
//   DLOCK_PLUGIN(register_redis)
#define DLOCK_PLUGIN_ABI_VERSION 1
#define DLOCK_PLUGIN(register_function)                                                              \
  extern "C" __attribute__((visibility("default"))) int dlock_plugin_abi_version() {                 \
    return DLOCK_PLUGIN_ABI_VERSION;                                                                 \
  }                                                                                                  \
  extern "C" __attribute__((visibility("default"))) void dlock_plugin_register(dlock::registry& r) { \
    register_function(r);                                                                            \
  }
