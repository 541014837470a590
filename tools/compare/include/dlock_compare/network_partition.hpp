#pragma once
// The partition fault's network: one namespace per client and a hub namespace, each client
// joined to the hub by a veth pair, and in the hub a forwarder per server port to the server on
// this process' loopback (the servers listen on 127.0.0.1 only).
//
//   client i (dlkc-PID-cI)                  hub (dlkc-PID-hub)                       root namespace
//   v0 10.213.I.2/30  <--veth-->  hI 10.213.I.1/30, lo 10.213.255.1 : PORT  --forwarder-->  127.0.0.1:PORT
//
// Every client reaches the servers at 10.213.255.1 (the hub's loopback, routed over its own veth),
// so all share one URI. cut(i) sets the hub's end of client i's veth down: that client's packets
// go nowhere (its own routes stay, marked linkdown), every other client is untouched; heal(i)
// sets it up again (the hub's route to it comes back with the link). Only addresses inside these
// namespaces are used. Names carry the pid; the destructor deletes the namespaces (and with them
// the veths) whatever happened, and sweep_stale() deletes those of runs whose process is gone.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::compare {

class tcp_forwarder;

class network_partition {
 public:
  // Why namespaces cannot be made here (not root, no `ip`), or empty when they can.
  static std::string unavailable_because();
  // Deletes the namespaces of runs whose process no longer exists.
  static void sweep_stale();
  // The server ports of a URI whose hosts are all 127.0.0.1 (or localhost); empty when a host
  // is elsewhere (the forwarder reaches loopback only).
  static std::vector<std::uint16_t> loopback_ports(const std::string& uri);

  // Builds the namespaces, links and forwarders; throws std::runtime_error naming the command
  // that failed (what was built is deleted).
  network_partition(std::uint32_t clients, const std::vector<std::uint16_t>& server_ports);
  ~network_partition();
  network_partition(const network_partition&) = delete;
  network_partition& operator=(const network_partition&) = delete;

  std::vector<std::string> launch_prefix(std::uint32_t client) const;  // ip netns exec NS
  std::string reachable_uri(const std::string& uri) const;             // 127.0.0.1 -> the hub
  void cut(std::uint32_t client);                                      // throws std::runtime_error when `ip` fails
  void heal(std::uint32_t client);
  std::vector<std::string> namespaces() const;  // hub first

 private:
  std::string hub_;
  std::vector<std::string> clients_;
  std::vector<std::unique_ptr<tcp_forwarder>> forwarders_;
};

// Every namespace `ip netns list` shows (for tests asserting none of a run is left).
std::vector<std::string> network_namespaces();

}  // namespace dlock::compare
