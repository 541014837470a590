#include "dlock_compare/tcp_forwarder.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace dlock::compare {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::system_error(errno, std::generic_category(), what); }

sockaddr_in address_of(const std::string& ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) {
    errno = EINVAL;
    fail("not an IPv4 address: " + ip);
  }
  return a;
}

// The listening socket, made on a thread of its own that enters the namespace first.
int listen_in(const std::filesystem::path& netns, const std::string& ip, std::uint16_t port) {
  int fd = -1;
  std::string error;
  int error_number = 0;
  std::thread([&] {
    const int ns = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      error_number = errno;
      error = "cannot enter the network namespace " + netns.string();
      if (ns >= 0) ::close(ns);
      return;
    }
    ::close(ns);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    const auto a = address_of(ip, port);
    if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
      error_number = errno;
      error = "cannot listen on " + ip + ":" + std::to_string(port) + " in " + netns.string();
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }).join();
  if (fd < 0) {
    errno = error_number;
    fail(error);
  }
  return fd;
}

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const auto a = address_of("127.0.0.1", port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Copies what `from` has to `to`; false when `from` ended or either side failed.
bool copy_available(int from, int to) {
  char buf[16384];
  const ssize_t n = ::recv(from, buf, sizeof buf, 0);
  if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
  for (ssize_t sent = 0; sent < n;) {
    const ssize_t w = ::send(to, buf + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

}  // namespace

tcp_forwarder::tcp_forwarder(const std::filesystem::path& netns, const std::string& listen_address, std::uint16_t port)
    : port_(port), listener_(listen_in(netns, listen_address, port)) {
  acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
}

tcp_forwarder::~tcp_forwarder() {
  acceptor_.request_stop();
  if (acceptor_.joinable()) acceptor_.join();
  pumps_.clear();  // each jthread is asked to stop and joined; it closes its sockets
  ::close(listener_);
}

// Polls with a short timeout so a stop request is seen within 100 ms.
void tcp_forwarder::accept_loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int server = connect_loopback(port_);
    if (server < 0) {  // the server is down: the client sees its connection closed, as it would
      ::close(client);
      continue;
    }
    // A send never blocks a pump for good (a client cut off with a full buffer): the destructor
    // joins every pump.
    const timeval send_limit{5, 0};
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof send_limit);
    ::setsockopt(server, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof send_limit);
    std::lock_guard lock(mutex_);
    pumps_.emplace_back([client, server](std::stop_token s) { pump(s, client, server); });
  }
}

// Both directions of one connection until either side ends; then both are closed, so an end
// seen on one side (a client that gave up, a server that restarted) reaches the other.
void tcp_forwarder::pump(std::stop_token stop, int client, int server) {
  pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
  while (!stop.stop_requested()) {
    if (::poll(p, 2, 100) < 0 && errno != EINTR) break;
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !copy_available(client, server)) break;
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !copy_available(server, client)) break;
  }
  ::close(client);
  ::close(server);
}

}  // namespace dlock::compare
