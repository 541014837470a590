#pragma once
// connection-kill and server-pause as scenarios (run_scenario dispatches here once the holder is
// caught, stopped, inside its write): the fault, the holder resumed, the fleet waited for, and
// what the cell needs measured from the history.
#include <cstdint>
#include <memory>

#include "dlock_compare/scenario.hpp"
#include "dlock_compare/session_blackhole.hpp"
#include "dlock_compare/worker_fleet.hpp"

namespace dlock::compare {

// connection-kill on a URI of a session_proxy family (one server): the proxy its workers connect through
// (plan.uri = routed_through(s.uri, proxy->port())); nullptr for every other URI.
std::unique_ptr<session_blackhole> session_blackhole_for(const std::string& uri);

// The holder `victim` is stopped inside its write: its connections to the URI's server are ended
// on the server (through `blackhole` when there is one: silenced for pause_length(s), so that the
// server expires its session), it is resumed at once, and the fleet is waited for until `deadline`.
void kill_holder_connections(worker_fleet& fleet, const fleet_plan& plan, std::uint32_t victim,
                             const scenario_settings& s, session_blackhole* blackhole, instant deadline,
                             scenario_result& r);

// The holder `victim` is stopped inside its write: the URI's server is SIGSTOPped, the holder
// resumed, the server resumed pause_length(s) later (a guard resumes it whatever happens), and
// the fleet is waited for until `deadline`.
void pause_server(worker_fleet& fleet, const fleet_plan& plan, std::uint32_t victim, const scenario_settings& s,
                  instant deadline, scenario_result& r);

// The cell's words for the holder's notification and the successor's grant, e.g.
// "holder told 0.34s in, next grant to another 0.90s in".
std::string notification_text(const scenario_result& r, std::string_view fault_word);

}  // namespace dlock::compare
