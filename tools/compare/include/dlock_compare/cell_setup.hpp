#pragma once
// How one cell of the matrix is set up, for `dlock compare` and the scenario tests alike: the URI a
// backend runs with under a fault (its server from the launcher's variables, the run's ttl and
// the parameters the fault needs), or why the cell cannot run; and the launcher's process a
// fault stops, starts or pauses. One copy, so the tests judge exactly what the tool runs.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "dlock/registry.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/servers.hpp"

namespace dlock::compare {

// Why a process-scope backend's cell does not run under any fault but healthy (its clients are
// threads of one process, which a fault on one client process would strike as a whole).
inline constexpr const char* process_scope_reason =
    "process scope (its clients are threads of one process; this fault strikes a client process)";

// `uri` with `parameter` ("key=value") appended to its query.
std::string with_parameter(std::string uri, const std::string& parameter);

// The URI `info`'s scheme runs with under `f`, every lock with `ttl` (and a session of `ttl` for a
// scheme that takes session_timeout instead), or why not ("no single server to restart",
// "<VARIABLE> unset", process_scope_reason, ...). A scheme without a server runs with the URI its
// backend declared (family::local_uri), "{dir}" replaced by `work_dir`.
server_uri cell_uri(const backend_info& info, fault f, std::chrono::milliseconds ttl,
                    const std::filesystem::path& work_dir);

// Sets s.launcher ($DLOCK_SERVERS) and s.server_process for the faults that act on a server
// through the launcher, s.acquire_has_two_commands, and s.clients_in_one_process (from the declared
// scope: a process-scope lock's clients are threads of one process); leaves the rest of `s` alone.
void prepare_settings(scenario_settings& s, const backend_info& info, fault f);

}  // namespace dlock::compare
