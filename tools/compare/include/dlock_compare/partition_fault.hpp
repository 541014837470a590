#pragma once
// partition: a real network partition between the holder and the server. Every client runs in a
// network namespace of its own and reaches the servers over a veth pair and a forwarder
// (network_partition.hpp); the holder caught inside its write has its link set down for 2.5 ttls,
// then up again. The cell says whether and when the holder was told before the next grant, the
// next grant after the cut, overlaps and stale writes, and what its release said once back.
#include <chrono>

#include "dlock_compare/scenario.hpp"

namespace dlock::compare {

std::chrono::milliseconds partition_run_length(const scenario_settings& s);
std::chrono::milliseconds partition_length(const scenario_settings& s);  // 2.5 ttls
// Why the partition cannot run against `uri` here (no namespaces, a server not on loopback), or "".
std::string partition_unavailable_because(const std::string& uri);
scenario_result run_partition(const scenario_settings& s);

}  // namespace dlock::compare
