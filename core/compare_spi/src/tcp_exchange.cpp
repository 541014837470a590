#include "dlock/compare_spi/tcp_exchange.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace dlock::compare_spi {

namespace {

class socket_fd {
 public:
  socket_fd() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~socket_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string tcp_exchange(const std::string& host, int port, std::string_view request, std::chrono::milliseconds timeout,
                         std::size_t max_answer) {
  socket_fd s;
  if (s.get() < 0) return {};
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return {};
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return {};
  for (std::size_t sent = 0; sent < request.size();) {
    const auto n = ::send(s.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return {};
    sent += static_cast<std::size_t>(n);
  }
  std::string answer;
  char buf[1024];
  for (ssize_t n; answer.size() < max_answer && (n = ::recv(s.get(), buf, sizeof buf, 0)) > 0;)
    answer.append(buf, static_cast<std::size_t>(n));
  return answer;
}

}  // namespace dlock::compare_spi
