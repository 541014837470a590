#include "dlock_compare/cell_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "dlock_compare/families.hpp"
#include "dlock_compare/kill_mid_acquire.hpp"
#include "dlock_compare/partition_fault.hpp"
#include "dlock_compare/quorum.hpp"
#include "dlock_compare/server_faults.hpp"

namespace dlock::compare {

namespace {

const char* launcher_variable() {
  const char* launcher = std::getenv("DLOCK_SERVERS");
  return launcher != nullptr && *launcher != '\0' ? launcher : nullptr;
}

// Why `f` cannot run on `info`'s scheme before any URI is made, or empty.
std::string not_applicable_because(const backend_info& info, fault f) {
  const std::string_view scheme = info.scheme;
  const bool needs_launcher = f == fault::server_restart || f == fault::server_pause || is_quorum_fault(f);
  if (f == fault::server_restart && launcher_process(scheme) == nullptr) return "no single server to restart";
  if (f == fault::server_pause && launcher_process(scheme) == nullptr) return "no single server to pause";
  if (f == fault::connection_kill) return connection_kill_not_applicable(scheme);
  if (is_quorum_fault(f))
    if (const auto why = quorum_not_applicable(scheme, f)) return *why;
  if (f == fault::partition && server_variable(scheme) == nullptr) return "no network";
  if (needs_launcher && launcher_variable() == nullptr) return "DLOCK_SERVERS unset";
  // A process-scope lock excludes the threads of one process only, so its clients are threads of
  // one worker (clients_in_one_process); every fault but healthy strikes one client process (kill,
  // stop, its own clock or network), which would strike them all.
  if (info.scope == lock_scope::process && f != fault::healthy) return process_scope_reason;
  return {};
}

}  // namespace

std::string with_parameter(std::string uri, const std::string& parameter) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + parameter;
}

server_uri cell_uri(const backend_info& info, fault f, std::chrono::milliseconds ttl,
                    const std::filesystem::path& work_dir) {
  if (auto why = not_applicable_because(info, f); !why.empty()) return {std::nullopt, std::move(why)};
  std::string uri;
  if (auto local = local_uri_for(info.scheme, work_dir)) {
    uri = std::move(*local);  // no server: the URI the backend declared, in the run's own folder
  } else {
    // The launcher's variable, the scheme replaced; the ensemble faults run on the scheme's ensemble.
    auto server = server_uri_for(info.scheme, is_ensemble_fault(f) ? quorum_server_variable(info.scheme, f) : nullptr);
    if (!server.uri) return server;
    uri = *server.uri;
  }
  uri = with_parameter(uri, "ttl=" + std::to_string(ttl.count()) + "ms");
  const auto accepts = [&](std::string_view key) {
    return std::ranges::find(info.parameters, key) != info.parameters.end();
  };
  // A healthy run restarts no server: it must not wait out a ttl because the launcher (or a
  // test) started the server just now. The fault runs keep the safe default.
  if (f == fault::healthy && accepts("wait_after_restart")) uri = with_parameter(uri, "wait_after_restart=false");
  if (f == fault::healthy && accepts("restart_delay")) uri = with_parameter(uri, "restart_delay=off");
  // A scheme whose grant lives as long as its session (it takes `session_timeout`, not the ttl):
  // its session is the ttl, so that every fault outlasts it as it outlasts the others' ttl (the
  // launcher's servers allow 1s); an ensemble's is its family's, longer than an election
  // (ensemble_session).
  if (accepts("session_timeout")) {
    const auto session = is_ensemble_fault(f) ? ensemble_session(info.scheme, ttl) : ttl;
    uri = with_parameter(uri, "session_timeout=" + std::to_string(session.count()) + "ms");
  }
  if (!info.unsafe_because.empty()) uri = with_parameter(uri, "unsafe=true");  // the row exists to show it fail
  if (f == fault::partition)
    if (auto why = partition_unavailable_because(uri); !why.empty()) return {std::nullopt, std::move(why)};
  return {uri, {}};
}

void prepare_settings(scenario_settings& s, const backend_info& info, fault f) {
  s.launcher.clear();
  s.server_process.clear();
  s.grants_nothing_after_start = {};
  if (f == fault::server_restart || f == fault::server_pause) {
    if (const char* launcher = launcher_variable()) s.launcher = launcher;
    if (const char* process = launcher_process(info.scheme)) s.server_process = process;
  }
  if (f == fault::server_restart)
    if (const auto* fam = family_of_scheme(info.scheme); fam != nullptr && fam->grants_nothing_after_start != nullptr)
      s.grants_nothing_after_start = fam->grants_nothing_after_start(s.ttl);
  if (is_quorum_fault(f)) {
    if (const char* launcher = launcher_variable()) s.launcher = launcher;
    if (const char* server = quorum_server(info.scheme, f)) s.server_process = server;
  }
  s.acquire_has_two_commands = acquire_has_two_commands(info);
  s.clients_in_one_process = info.scope == lock_scope::process;
}

}  // namespace dlock::compare
