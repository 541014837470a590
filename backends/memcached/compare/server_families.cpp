// What dlock compare's server faults need of the memcached server (tools/compare, server_family.hpp).
#include "dlock_compare/server_family.hpp"

namespace dlock::compare {

namespace {

constexpr server_family families[] = {
    {.prefix = "memcached",
     .variable = "DLOCK_MEMCACHED_URI",
     .launcher_process = "memcached",
     .connection_kill_not_applicable = "a memcached lock is an item with an expiry, not tied to a connection",
     .default_port = 11211},
};

}  // namespace

std::span<const server_family> server_families_memcached() noexcept { return families; }

}  // namespace dlock::compare
