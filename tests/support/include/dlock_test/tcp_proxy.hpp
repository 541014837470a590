#pragma once
// tcp_proxy: a network between a client and a server, on loopback, that a test can cut.
//
// The client connects to 127.0.0.1:port() instead of the server; every connection is forwarded
// byte for byte. partition() cuts the link the way a real partition does: nothing is delivered in
// either direction and nothing is closed (no FIN, no RST), so each side learns only through its own
// timeouts; new connections are accepted by the kernel but get no answer. heal() delivers again
// (what was sent meanwhile arrives late, as TCP's retransmissions would deliver it). A test uses
// it instead of firewall rules, which these machines do not have, and it touches no address but
// loopback.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::testing {

class tcp_proxy {
 public:
  // Listens on an ephemeral loopback port and forwards to host:port. Throws std::system_error.
  tcp_proxy(std::string target_host, std::uint16_t target_port);
  ~tcp_proxy();  // closes every connection
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  std::uint16_t port() const noexcept;
  // "host:port" of the proxy's listening end, for building a URI.
  std::string address() const;

  void partition();
  void heal();
  // Closes every forwarded connection on both sides (as a server-side kill or a reset would).
  void reset_connections();
  // Connections accepted so far, for tests that must know the client really went through here.
  std::size_t connections_accepted() const;

 private:
  class engine;
  std::unique_ptr<engine> engine_;
};

// `uri` with its first host:port replaced by the proxy's (a URI of one server).
std::string through(const std::string& uri, const tcp_proxy& proxy);

// One proxy for each server of `uri`, in the URI's order.
std::vector<std::unique_ptr<tcp_proxy>> proxies_for(const std::string& uri);
// `uri` with each host:port replaced by its proxy's (proxies_for's order).
std::string through(const std::string& uri, const std::vector<std::unique_ptr<tcp_proxy>>& proxies);

// Cuts the link for the life of the guard: heal() runs whatever the test does, even on an ASSERT.
class partition_guard {
 public:
  explicit partition_guard(tcp_proxy& proxy) : proxy_(proxy) { proxy_.partition(); }
  ~partition_guard() { proxy_.heal(); }
  partition_guard(const partition_guard&) = delete;
  partition_guard& operator=(const partition_guard&) = delete;

 private:
  tcp_proxy& proxy_;
};

}  // namespace dlock::testing
