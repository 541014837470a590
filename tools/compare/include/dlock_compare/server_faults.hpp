#pragma once
// The server-side faults of the comparison suite, injected from outside the client processes:
//   connection-kill  the holder's connection(s) ended by the server, as an operator or a server
//                    timeout does it, with the server's own command as its backend declares it
//                    (family::kill_connections, dlock/compare_spi/family.hpp). The holder's
//                    connections are found from outside: its pid's TCP sockets to the server's
//                    port (/proc/PID/fd inodes in /proc/net/tcp{,6}) give their local ports,
//                    matched against the server's own client list. The servers' CLI tools
//                    do it with the URI's own credentials (the password
//                    in the environment, never on a command line), so the compare library depends
//                    on no backend's client library.
//   server-pause     every process of the URI's server SIGSTOPped (the launcher's `pid NAME` and
//                    their descendants: a server may serve each client from a child process), resumed
//                    by a guard whatever happens.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock_compare/families.hpp"

namespace dlock::compare {

// The local ports of `pid`'s TCP connections to `server_port` (any address, IPv4 or IPv6).
std::vector<std::uint16_t> tcp_ports_to(pid_t pid, std::uint16_t server_port);

// Why connection-kill cannot be injected into a backend of `scheme`, or empty when it can (a
// session_proxy family: through session_blackhole.hpp, not kill_connections_on_server).
std::string connection_kill_not_applicable(std::string_view scheme);

// Ends, on the server of `uri` (the lock URI the workers opened), every client connection whose
// port is in `client_ports`. The tool's error is reported redacted.
killed_connections kill_connections_on_server(const std::string& uri, const std::vector<std::uint16_t>& client_ports);

// The URI's server port (its family's default when the URI gives none).
std::uint16_t server_port_of(const std::string& uri);

// Every process of the launcher's server NAME SIGSTOPped while this lives; SIGCONTinued (all of
// them, whatever happened) when it ends.
class frozen_server {
 public:
  frozen_server(const std::filesystem::path& launcher, const std::string& process);
  ~frozen_server();
  frozen_server(const frozen_server&) = delete;
  frozen_server& operator=(const frozen_server&) = delete;

  bool frozen() const noexcept { return !pids_.empty(); }
  const std::string& why_not() const noexcept { return why_not_; }
  void resume() noexcept;

 private:
  std::vector<pid_t> pids_;
  std::string why_not_;
};

}  // namespace dlock::compare
