#pragma once
// The quorum faults: servers of a multi-server backend stopped through the launcher while a
// holder is inside its write (the holder is not touched; it keeps running and renewing).
// They run on each family that declares their kind, on its own servers (family::quorum,
// dlock/compare_spi/family.hpp):
//   masters-minority-lost   three independent masters: the third (<server>.3) stopped for 3 ttls,
//                           then started again: the other two still make a majority, so grants go on
//   master-restarted-empty  independent masters, Kleppmann's case: <server>.3 is stopped (the next
//                           holder has its keys on 1 and 2 only), then, while that holder writes,
//                           <server>.3 comes back and <server>.1 crashes and restarts without
//                           persistence, both empty: a second client can assemble a majority of 1
//                           and 3 unless restarted masters are kept out for a ttl (the backend's
//                           delayed restart)
//   masters-majority-lost   independent masters: <server>.1 and <server>.2 stopped for 2 ttls: no
//                           majority, no grant; the holder's renewals fail and it is told; grants
//                           after they are back
//   ensemble-leader-lost    a 3-member consensus ensemble: the member that says it leads
//                           (family::is_leader) is stopped; the holder's session survives an
//                           election shorter than it
//   ensemble-majority-lost  the ensemble: two of three members stopped for the session and 2 s: no
//                           quorum, no grant, the holder told within its session
// The ensemble's session (ensemble_session below) is its family's: a session timeout or a lease's TTL.
// Every process stopped is started again by a guard, whatever happens.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "dlock_compare/scenario.hpp"

namespace dlock::compare {

bool is_quorum_fault(fault f) noexcept;
bool is_ensemble_fault(fault f) noexcept;  // the ensemble-* ones (the others are the masters-* ones)

// The launcher's server the fault stops processes of when it runs on `scheme`, and the variable
// holding its URI, as the scheme's family declares them (family::quorum_server, quorum_variable);
// nullptr for other faults or when the scheme's family does not take the fault's kind.
const char* quorum_server(std::string_view scheme, fault f) noexcept;
const char* quorum_server_variable(std::string_view scheme, fault f) noexcept;

// How long a holder's grant on `scheme` outlives its last contact with the ensemble's quorum when
// the run's locks have `ttl` (family::ensemble_session: a session timeout above an election, or a
// lease's TTL); `ttl` for a family that declares none. The ensemble faults are timed from it.
std::chrono::milliseconds ensemble_session(std::string_view scheme, std::chrono::milliseconds ttl);

// Why `scheme` cannot run quorum fault `f` ("single server", ...), or nullopt when it can.
std::optional<std::string> quorum_not_applicable(std::string_view scheme, fault f);

std::chrono::milliseconds quorum_run_length(fault f, const scenario_settings& s);

// Runs a quorum fault; s.launcher and s.server_process (quorum_server) must be set, s.uri must
// name the members in the launcher's order (process .1 first).
scenario_result run_quorum_scenario(fault f, const scenario_settings& s);

std::string quorum_observation(fault f, const scenario_result& r);

// The legend's lines for these faults' cells, and the outcome as a JSON object (durations in ms).
std::string quorum_legend();
std::string to_json(const quorum_outcome& q);

}  // namespace dlock::compare
