#pragma once
// What dlock compare's server faults need to know of a backend's server: the launcher's variable
// for its URI, its process for restart and pause, its default port, and how a client's connection
// is ended on it. Each backend declares its own in its folder (backends/<name>/compare/
// server_families.cpp, announced by dlock_compare_server() in its CMakeLists.txt), so a backend
// with a server teaches dlock compare about it without a line outside its folder.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/uri.hpp"
#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

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
enum class quorum_kind { none,
                         independent_masters,
                         ensemble };

struct server_family {
  // The schemes served: `prefix` itself and `prefix+...` ("redis": redis://, redis+fair://, ...).
  std::string_view prefix = {};
  // Not empty: only the schemes of `prefix` that end in it ("+sentinel": redis+sentinel://,
  // redis+fair+sentinel://), and those before the family of `prefix` alone.
  std::string_view suffix = {};
  const char* variable = nullptr;          // the launcher's variable holding the server's URI
  const char* launcher_process = nullptr;  // its one process for stop/start/pause; nullptr: several
  connection_kill kill = connection_kill::not_applicable;
  // server_command: ends, on the server of `u`, every client connection whose port is in
  // `client_ports`, with the URI's own credentials (in the tool's environment, never its argv).
  killed_connections (*kill_connections)(const dlock::uri& u, const std::vector<std::uint16_t>& client_ports) = nullptr;
  std::string_view connection_kill_not_applicable = {};
  // Not empty: why `partition` cannot cut this family's clients off (it forwards the URI's own
  // loopback ports into the clients' namespaces, and servers that hand out other addresses,
  // such as Redis Sentinel naming the master, are not reached through it).
  std::string_view partition_not_applicable = {};
  quorum_kind quorum = quorum_kind::none;
  const char* quorum_variable = nullptr;  // DLOCK_REDLOCK_URI, DLOCK_ZOOKEEPER_ENSEMBLE_URI
  const char* quorum_server = nullptr;    // the launcher's server of several processes (redlock.1 ...)
  std::uint16_t default_port = 0;         // when a URI names no port
};

// Every family the built backends declared.
std::span<const server_family* const> server_families() noexcept;

// The family serving `scheme`, or nullptr (memory, file: no server).
const server_family* family_of_scheme(std::string_view scheme) noexcept;

// The family whose servers take the quorum faults of `kind`, or nullptr.
const server_family* family_of_quorum(quorum_kind kind) noexcept;

}  // namespace dlock::compare
