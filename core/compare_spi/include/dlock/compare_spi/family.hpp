#pragma once
// What `dlock compare` (tools/compare) needs to know of a backend's schemes, declared by the
// backend in its own folder: backends/<name>/compare/families.cpp defines
//   std::span<const dlock::compare_spi::family> dlock::compare_spi::families_<name>() noexcept;
// announced by dlock_compare_families(<name> ...) in its CMakeLists.txt. For a scheme with a
// server: the launcher's variable for its URI, its process for restart and pause, its default
// port, how a client's connection is ended on it, the quorum faults it takes, how to find an
// ensemble's leader and how long a grant outlives a lost quorum. For a scheme without one: the
// URI a run opens it with.
//
// This library sits below both sides: a backend's declarations include only these headers and
// the core's, and the harness links the declarations of the backends built. Nothing here knows
// a backend, and nothing here knows the harness.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/compare_spi/shared_clock.hpp"
#include "dlock/uri.hpp"

namespace dlock::compare_spi {

struct killed_connections {
  std::size_t count = 0;     // connections the server ended
  std::string not_injected;  // not empty: why none was (the tool failed, no connection found)
  // When the tool that ends them was started (after any listing): the server acts within that
  // tool's start-up and connect, tens of milliseconds later.
  std::optional<instant> issued_at;
};

// How connection-kill is made on a server.
enum class connection_kill {
  not_applicable,  // `connection_kill_not_applicable` says why
  server_command,  // `kill_connections` ends them with the server's own command
  session_proxy,   // the holder is silenced through a proxy until the server expires its session
};

// The quorum faults a family over several servers takes (masters-* for independent masters,
// ensemble-* for a consensus ensemble), on the launcher's `quorum_variable` and `quorum_server`.
enum class quorum_kind { none, independent_masters, ensemble };

struct family {
  // The schemes covered: `prefix` itself and `prefix+...` (prefix "x": x://, x+fair://, ...).
  std::string_view prefix = {};
  // Not empty: only the schemes of `prefix` that end in it ("+sentinel": x+sentinel://,
  // x+fair+sentinel://), and those before the family of `prefix` alone.
  std::string_view suffix = {};
  // A family without a server (variable nullptr): the URI a run opens its schemes with, where
  // "{dir}" (if present) stands for a folder of the run's own, e.g. "x://{dir}/locks".
  const char* local_uri = nullptr;
  const char* variable = nullptr;          // the launcher's variable holding the server's URI
  const char* launcher_process = nullptr;  // its one process for stop/start/pause; nullptr: several
  connection_kill kill = connection_kill::not_applicable;
  // server_command: ends, on the server of `u`, every client connection whose port is in
  // `client_ports`, with the URI's own credentials (in the tool's environment, never its argv).
  killed_connections (*kill_connections)(const dlock::uri& u, const std::vector<std::uint16_t>& client_ports) = nullptr;
  // server_command: how, in a few words, for the legend and --help ("KILL with the server's client").
  std::string_view kill_described = {};
  std::string_view connection_kill_not_applicable = {};
  // Not empty: why `partition` cannot cut this family's clients off (it forwards the URI's own
  // loopback ports into the clients' namespaces, and servers that hand out other addresses,
  // such as a sentinel naming the master, are not reached through it).
  std::string_view partition_not_applicable = {};
  quorum_kind quorum = quorum_kind::none;
  const char* quorum_variable = nullptr;  // the launcher's variable holding the URI of every member
  const char* quorum_server = nullptr;    // the launcher's server of several processes (<server>.1 ...)
  // ensemble: whether the member at host:port says it leads now (false when it does not answer
  // within `timeout`, follows, or serves no quorum), for the ensemble-leader-lost fault.
  bool (*is_leader)(const std::string& host, int port, std::chrono::milliseconds timeout) = nullptr;
  // ensemble: how long a holder's grant outlives its last contact with a quorum when the run's locks
  // have `ttl` (a session timeout the ensemble faults set, or a lease's TTL as the server grants
  // it): the ensemble faults time the holder's write and the outages from it, so it must outlast an
  // election. A scheme that takes `session_timeout` gets it in the ensemble cells' URIs.
  std::chrono::milliseconds (*ensemble_session)(std::chrono::milliseconds ttl) = nullptr;
  std::uint16_t default_port = 0;  // when a URI names no port
  // How long after its server's start the family's schemes grant nothing by design to a lock of
  // `ttl` (memcached's delayed restart): server-restart runs that long past the start, so that
  // the grant after it falls inside the run. nullptr: they grant as soon as the server answers.
  std::chrono::milliseconds (*grants_nothing_after_start)(std::chrono::milliseconds ttl) = nullptr;
};

}  // namespace dlock::compare_spi
