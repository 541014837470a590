// What dlock compare's server faults need of the memcached server (core/compare_spi: family.hpp).
#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

namespace {

constexpr family families[] = {
    {.prefix = "memcached",
     .variable = "DLOCK_MEMCACHED_URI",
     .launcher_process = "memcached",
     .connection_kill_not_applicable = "a memcached lock is an item with an expiry, not tied to a connection",
     .default_port = 11211},
};

}  // namespace

std::span<const family> families_memcached() noexcept { return families; }

}  // namespace dlock::compare_spi
