#include "dlock_compare/zookeeper_mode.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dlock::compare {

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

std::string zookeeper_mode(const std::string& host, int port, std::chrono::milliseconds timeout) {
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
  if (::send(s.get(), "srvr", 4, MSG_NOSIGNAL) != 4) return {};
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::recv(s.get(), buf, sizeof buf, 0)) > 0 && answer.size() < 16384;) answer.append(buf, static_cast<std::size_t>(n));
  const auto at = answer.find("Mode: ");
  if (at == std::string::npos) return {};
  const auto end = answer.find('\n', at);
  return answer.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

}  // namespace dlock::compare
