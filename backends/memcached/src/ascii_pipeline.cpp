#include "ascii_pipeline.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace dlock::memcached {

namespace {

using steady = std::chrono::steady_clock;

int remaining_ms(steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// Parses the answers of `gets` commands in `in` from `at`: VALUE blocks into `items`, each END
// counted in `ends`. Returns false on a line that is neither (an error line); `at` stays at the
// first incomplete line.
bool parse_gets(const std::string& in, std::size_t& at, int& ends, std::unordered_map<std::string, item>& items,
                std::string& why) {
  while (true) {
    const auto eol = in.find("\r\n", at);
    if (eol == std::string::npos) return true;
    const std::string_view line(in.data() + at, eol - at);
    if (line == "END") {
      ++ends;
      at = eol + 2;
      continue;
    }
    if (!line.starts_with("VALUE ")) {
      why = std::string(line.substr(0, 200));
      return false;
    }
    // VALUE <key> <flags> <bytes> <cas>
    std::string_view rest = line.substr(6);
    std::string_view fields[4];
    for (auto& f : fields) {
      const auto sp = rest.find(' ');
      f = rest.substr(0, sp);
      rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    }
    std::size_t bytes = 0;
    std::uint64_t cas = 0;
    if (std::from_chars(fields[2].data(), fields[2].data() + fields[2].size(), bytes).ec != std::errc{} ||
        std::from_chars(fields[3].data(), fields[3].data() + fields[3].size(), cas).ec != std::errc{}) {
      why = "unreadable answer: " + std::string(line.substr(0, 200));
      return false;
    }
    if (in.size() < eol + 2 + bytes + 2) return true;  // the data block is not all here yet
    items.insert_or_assign(std::string(fields[0]), item{in.substr(eol + 2, bytes), cas});
    at = eol + 2 + bytes + 2;
  }
}

}  // namespace

ascii_pipeline::ascii_pipeline(std::string host, in_port_t port, std::chrono::milliseconds connect_timeout,
                               std::chrono::milliseconds io_timeout)
    : host_(std::move(host)), port_(port), connect_timeout_(connect_timeout), io_timeout_(io_timeout) {}

ascii_pipeline::~ascii_pipeline() { close(); }

void ascii_pipeline::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ascii_pipeline::connect(std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found); rc != 0) {
    why = "cannot resolve " + host_ + ": " + ::gai_strerror(rc);
    return false;
  }
  const auto deadline = steady::now() + connect_timeout_;
  for (auto* a = found; a && fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 1 : 0;
    if (!ok && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      ok = ::poll(&p, 1, remaining_ms(deadline)) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
           err == 0;
    }
    if (!ok) {
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd_ = fd;
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) why = "cannot connect to " + host_ + ":" + std::to_string(port_);
  return fd_ >= 0;
}

std::optional<std::unordered_map<std::string, item>> ascii_pipeline::exchange(std::string_view request, int gets_lines,
                                                                              std::string& why) {
  if (fd_ < 0 && !connect(why)) return std::nullopt;
  std::unordered_map<std::string, item> items;
  std::string in;
  std::size_t sent = 0, parsed = 0;
  int ends = 0;
  const auto deadline = steady::now() + io_timeout_;
  // Writes and reads in one loop: the server may answer the first `gets` before the last request
  // is written, and neither side may wait for the other with full buffers.
  while (ends < gets_lines) {
    pollfd p{fd_, static_cast<short>(POLLIN | (sent < request.size() ? POLLOUT : 0)), 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready <= 0) {
      why = ready == 0 ? "timed out" : std::string("poll: ") + std::strerror(errno);
      close();
      return std::nullopt;
    }
    if ((p.revents & POLLOUT) && sent < request.size()) {
      const auto n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        why = std::string("send: ") + std::strerror(errno);
        close();
        return std::nullopt;
      }
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[65536];
      const auto n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        why = n == 0 ? "the server closed the connection" : std::string("recv: ") + std::strerror(errno);
        close();
        return std::nullopt;
      }
      if (n > 0) {
        in.append(buffer, static_cast<std::size_t>(n));
        if (!parse_gets(in, parsed, ends, items, why)) {
          close();
          return std::nullopt;
        }
      }
    }
  }
  if (sent < request.size() || parsed != in.size()) {  // answers to requests we did not make
    why = "unexpected answer after the last END";
    close();
    return std::nullopt;
  }
  return items;
}

}  // namespace dlock::memcached
