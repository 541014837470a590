// What dlock compare's server faults need of the etcd server (core/compare_spi: family.hpp). The cluster's
// quorum faults (leader lost, majority lost) are not declared yet.
#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

namespace {

constexpr family families[] = {
    {.prefix = "etcd",
     .variable = "DLOCK_ETCD_URI",
     .launcher_process = "etcd",
     .connection_kill_not_applicable =
         "an etcd grant is a lease kept by keep-alive requests, each on any connection, not tied to one",
     .default_port = 2379},
};

}  // namespace

std::span<const family> families_etcd() noexcept { return families; }

}  // namespace dlock::compare_spi
