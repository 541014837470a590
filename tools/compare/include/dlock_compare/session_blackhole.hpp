#pragma once
// connection-kill on a session_proxy family (family.hpp): the server has no command that ends a
// client's session (and the trick of a second handle opened with the holder's session id and
// password needs secrets a dlock client does not hand out), so the session is expired the way the
// server itself expires one:
// the holder's connection goes silent for longer than the session timeout. The workers of the
// cell connect through this loopback proxy; blackhole(pid) stops forwarding, in both directions,
// every connection of that process (found by its sockets' local ports, as server_faults.hpp
// does) and every one it opens meanwhile, without closing any; after the given length it forwards
// again, and the client hears from the server that its session expired. The other clients'
// connections are never touched. No firewall rule, no address but loopback.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

class session_blackhole {
 public:
  // Listens on an ephemeral loopback port, forwarding to host:port. Throws std::system_error.
  session_blackhole(const std::string& host, std::uint16_t port);
  ~session_blackhole();  // stops forwarding and closes every connection
  session_blackhole(const session_blackhole&) = delete;
  session_blackhole& operator=(const session_blackhole&) = delete;

  std::uint16_t port() const noexcept;
  // Silences `pid`'s connections until `until`; returns how many it had open then.
  std::size_t blackhole(pid_t pid, instant until);

 private:
  class engine;
  std::unique_ptr<engine> engine_;
};

// `uri` with its (single) host:port replaced by 127.0.0.1:port, user, path and query kept;
// nullopt-like empty string when the URI names several hosts.
std::string routed_through(const std::string& uri, std::uint16_t port);

}  // namespace dlock::compare
