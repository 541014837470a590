// The partition proxy of the fault tests (tests/support): forwards, cuts without closing, heals,
// resets. Its own test, so a partition test that passes is not passing because the proxy never cut.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "dlock_test/tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;

struct socket_fd {
  int fd = -1;
  ~socket_fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A listening socket on an ephemeral loopback port.
socket_fd listen_on_loopback(std::uint16_t& port) {
  socket_fd s{::socket(AF_INET, SOCK_STREAM, 0)};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(s.fd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return s;
}

socket_fd connect_to(std::uint16_t port) {
  socket_fd s{::socket(AF_INET, SOCK_STREAM, 0)};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return s;
}

// What arrives on fd within `wait`: empty when nothing did; "<closed>" / "<reset>" at EOF / error.
std::string receive(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
  char buffer[256];
  const auto n = ::recv(fd, buffer, sizeof buffer, 0);
  if (n == 0) return "<closed>";
  if (n < 0) return "<reset>";
  return std::string(buffer, static_cast<std::size_t>(n));
}

TEST(TcpProxy, ForwardsCutsWithoutClosingHealsAndResets) {
  std::uint16_t server_port = 0;
  auto listener = listen_on_loopback(server_port);
  dlock::testing::tcp_proxy proxy("127.0.0.1", server_port);
  auto client = connect_to(proxy.port());
  socket_fd server{::accept(listener.fd, nullptr, nullptr)};
  ASSERT_GE(server.fd, 0);
  EXPECT_EQ(proxy.connections_accepted(), 1u);

  ASSERT_EQ(::send(client.fd, "ping", 4, 0), 4);
  EXPECT_EQ(receive(server.fd, 5s), "ping");

  {
    dlock::testing::partition_guard cut(proxy);
    ASSERT_EQ(::send(client.fd, "lost?", 5, 0), 5);  // the sender cannot tell: like a real partition
    ASSERT_EQ(::send(server.fd, "back", 4, 0), 4);
    EXPECT_EQ(receive(server.fd, 300ms), "") << "delivered through a partition";
    EXPECT_EQ(receive(client.fd, 300ms), "") << "delivered through a partition";
  }
  // Healed: what was sent meanwhile arrives late, as TCP would retransmit it.
  EXPECT_EQ(receive(server.fd, 5s), "lost?");
  EXPECT_EQ(receive(client.fd, 5s), "back");

  proxy.reset_connections();
  const auto after_reset = receive(client.fd, 5s);
  EXPECT_TRUE(after_reset == "<reset>" || after_reset == "<closed>") << after_reset;
}

}  // namespace
