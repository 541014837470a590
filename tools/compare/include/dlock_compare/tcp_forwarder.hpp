#pragma once
// A TCP forwarder listening inside a network namespace and forwarding each connection to a port
// on this process' own loopback: how a client in a namespace of the partition fault reaches a
// server that listens on 127.0.0.1 only. The listening socket is made by a thread that has
// entered the namespace (setns is per thread; a socket stays in the namespace it was made in);
// the connections to the server are made from the process' namespace.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::compare {

class tcp_forwarder {
 public:
  // Listens on listen_address:port inside the namespace whose file is `netns` (/run/netns/NAME)
  // and forwards to 127.0.0.1:port. Throws std::system_error naming what failed.
  tcp_forwarder(const std::filesystem::path& netns, const std::string& listen_address, std::uint16_t port);
  // Stops accepting, closes every connection, joins every thread.
  ~tcp_forwarder();
  tcp_forwarder(const tcp_forwarder&) = delete;
  tcp_forwarder& operator=(const tcp_forwarder&) = delete;

 private:
  void accept_loop(std::stop_token stop);
  static void pump(std::stop_token stop, int client, int server);

  std::uint16_t port_;
  int listener_ = -1;
  std::mutex mutex_;
  std::list<std::jthread> pumps_;  // one per connection, each closing its two sockets when it ends
  std::jthread acceptor_;          // last: started once everything it uses exists
};

}  // namespace dlock::compare
