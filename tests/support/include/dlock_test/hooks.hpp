#pragma once
// Per-backend hooks for the conformance suite, registered by URI scheme from each backend's
// backends/<name>/tests/hooks.cpp (listed as HOOK_SOURCES in dlock_join_conformance).
//
//   DLOCK_TEST_HOOKS("redis", {
//       .break_lock = [](const std::string& uri, const dlock::lease& held) { /* CLIENT KILL / DEL */ },
//       .is_held_on_server = [](const std::string& uri, std::string_view name) { /* EXISTS */ }});
#include <functional>
#include <string>
#include <string_view>

#include "dlock/lease.hpp"

namespace dlock::testing {

struct backend_hooks {
  // Breaks the grant behind `held` for real, from outside the holder, the way an operator, a
  // failover or a network fault would: Redis DEL or CLIENT KILL, pg_terminate_backend, MariaDB
  // KILL, ZooKeeper session expiry, a memcached out-of-band delete, the memory backend's
  // test-only break. After it returns, the lease's lost_token() must fire (for backends that
  // declare lost_notification) within the lease's ttl plus a margin.
  std::function<void(const std::string& uri, const dlock::lease& held)> break_lock;
  // Reads the server directly (ShedLock's probe): is `name` held by anyone right now?
  std::function<bool(const std::string& uri, std::string_view name)> is_held_on_server;
  // True when the backend moves a lease's valid_until() forward by itself while its server answers
  // (ZooKeeper: the session's heartbeats): a grant never expires unrenewed while its holder lives,
  // so a test that needs an expired grant breaks it with break_lock instead of waiting.
  bool validity_kept_alive = false;
  // True when a stop request cannot cut a command the server never answers, which then ends at
  // the backend's command_timeout (memcached: libmemcached owns its sockets and offers no way to
  // interrupt a call from another thread). The README says so; the cancellation test then sets a
  // short command_timeout and expects the end within its bound.
  bool stop_waits_out_a_silent_command = false;
  // True when the URI names servers that announce the ones the locks live on (Redis Sentinel's
  // sentinels, a Redis Cluster's seed nodes): a proxy in front of each named server does not stand
  // between the client and its data, so the tests that silence the servers through proxies skip.
  bool data_servers_announced = false;
  // What backend::inspect, list and force_release do on this backend, as its README declares it.
  // The conformance suite checks it both ways: what is declared works, what is not says
  // errc::not_supported.
  struct inspection_support {
    bool inspect = false;
    bool list = false;
    bool force_release = false;
    // How inspect names a holder: by its lock object's owner id; by the "<host>:<pid>" that the
    // default owner id starts with (file://, from the kernel's table of flocks); or by what the
    // server records instead, not derived from the owner id (a Redis grant's token or Redisson
    // owner field): then only checked to be there.
    enum class owner_record { owner_id, host_pid, server_id };
    owner_record owner = owner_record::owner_id;
  };
  inspection_support inspection{};
};

// Registration by scheme ("redis", "mysql+forupdate"). The last registration of a scheme wins.
bool register_hooks(std::string scheme, backend_hooks hooks);
const backend_hooks* find_hooks(std::string_view scheme);

}  // namespace dlock::testing

// Test code only (backends themselves register explicitly, never through static initializers).
#define DLOCK_TEST_HOOKS_CONCAT2(a, b) a##b
#define DLOCK_TEST_HOOKS_CONCAT(a, b) DLOCK_TEST_HOOKS_CONCAT2(a, b)
#define DLOCK_TEST_HOOKS(scheme_string, ...)                                          \
  static const bool DLOCK_TEST_HOOKS_CONCAT(dlock_test_hooks_registered_, __LINE__) = \
      ::dlock::testing::register_hooks(scheme_string, ::dlock::testing::backend_hooks __VA_ARGS__)
