// What dlock compare's server faults need of the ZooKeeper servers (tools/compare, server_family.hpp).
#include "dlock_compare/server_family.hpp"

namespace dlock::compare {

namespace {

constexpr server_family families[] = {
    // ZooKeeper has no command that ends a client's session: the holder is silenced through a
    // proxy until the server expires its session. The ensemble takes the ensemble-* faults.
    {.prefix = "zookeeper",
     .variable = "DLOCK_ZOOKEEPER_URI",
     .launcher_process = "zookeeper",
     .kill = connection_kill::session_proxy,
     .quorum = quorum_kind::ensemble,
     .quorum_variable = "DLOCK_ZOOKEEPER_ENSEMBLE_URI",
     .quorum_server = "zookeeper-ensemble",
     .default_port = 2181},
};

}  // namespace

std::span<const server_family> server_families_zookeeper() noexcept { return families; }

}  // namespace dlock::compare
