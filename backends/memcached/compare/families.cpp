// What dlock compare's server faults need of the memcached server (core/compare_spi: family.hpp).
#include "../src/server_time.hpp"
#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

namespace {

// A restarted server grants nothing until its reported uptime reaches min_uptime_to_grant, which
// its one-second clock reaches up to a second late.
std::chrono::milliseconds grants_nothing_after_start(std::chrono::milliseconds ttl) {
  return memcached::min_uptime_to_grant(ttl) + std::chrono::seconds{1};
}

constexpr family families[] = {
    {.prefix = "memcached",
     .variable = "DLOCK_MEMCACHED_URI",
     .launcher_process = "memcached",
     .connection_kill_not_applicable = "a memcached lock is an item with an expiry, not tied to a connection",
     .default_port = 11211,
     .grants_nothing_after_start = grants_nothing_after_start},
};

}  // namespace

std::span<const family> families_memcached() noexcept { return families; }

}  // namespace dlock::compare_spi
