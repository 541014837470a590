#pragma once
// The gateway requests every etcd primitive is made of: ranges over a name's keys in create-revision
// order, and the lease calls (grant, keep-alive, revoke).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <system_error>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"
#include "gateway.hpp"

namespace dlock::etcd {

// `f()`, an acquire step that may throw: a dlock::error or another exception becomes `ec` (and
// nullptr), so the SPI's noexcept entry points report what the gateway said.
template <class F>
std::unique_ptr<spi::lease_state> guarded(std::error_code& ec, F&& f) noexcept {
  try {
    return f();
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, std::string("etcd: ") + e.what());
  }
  return nullptr;
}

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string prefix_end(std::string prefix);
// A lease id as Go's concurrency.Mutex writes it into its key: lower-case hex.
std::string hex_of(std::int64_t id);

// A range over the keys under `prefix`, one key: the first created.
json first_created(const std::string& prefix);
// The last key created below revision `below` in [begin, end), or under `prefix`.
json last_created_below(const std::string& begin, const std::string& end, std::int64_t below);
json last_created_below(const std::string& prefix, std::int64_t below);

// The kvs of a range answer (an empty array when there are none).
const json& range_kvs(const json& response);
// The i-th range answer of a transaction's answer (an empty object when there is none).
const json& txn_range(const json& txn, std::size_t i);
// The create revision of a range answer's first key, or 0.
std::int64_t first_create_revision(const json& range);

struct granted_lease {
  std::int64_t id = 0;
  std::int64_t seconds = 0;
};
granted_lease grant(gateway& gw, std::int64_t seconds);
// Revokes `id`, its keys with it; a failure is left to the lease's TTL.
void revoke_quietly(gateway& gw, std::int64_t id) noexcept;
// The remaining TTL a keep-alive reports; 0 when the lease is gone.
std::int64_t keep_alive(gateway& gw, std::int64_t id);

}  // namespace dlock::etcd
