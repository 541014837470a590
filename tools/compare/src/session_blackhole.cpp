#include "dlock_compare/session_blackhole.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock_compare/server_faults.hpp"

namespace dlock::compare {

namespace {

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

struct forwarded {
  int client = -1;
  int server = -1;
  std::uint16_t client_port = 0;  // the client's local port: its process is found by it
  bool silenced = false;
  ~forwarded() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

// Writes all of `data` (blocking: the few bytes of a session's exchange); false when the peer is gone.
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

class session_blackhole::engine {
 public:
  engine(const std::string& host, std::uint16_t port) {
    target_.sin_family = AF_INET;
    target_.sin_port = htons(port);
    if (::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &target_.sin_addr) != 1)
      throw std::system_error(EINVAL, std::generic_category(), "session_blackhole: not an IPv4 address: " + host);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw_errno("socket");
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof local;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 || ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      ::close(listener_);
      throw_errno("session_blackhole: listen on loopback");
    }
    port_ = ntohs(local.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~engine() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }

  std::uint16_t port() const noexcept { return port_; }

  std::size_t blackhole(pid_t pid, instant until) {
    std::lock_guard guard(mutex_);
    pid_ = pid;
    until_ = until;
    const auto ports = tcp_ports_to(pid, port_);
    std::size_t count = 0;
    for (auto& c : connections_)
      if (std::ranges::find(ports, c.client_port) != ports.end()) {
        c.silenced = true;
        ++count;
      }
    return count;
  }

 private:
  // One pass every 10 ms at most: accept, forward what the unsilenced connections have, heal at the end.
  void run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      {
        std::lock_guard guard(mutex_);
        if (pid_ != 0 && shared_clock::now() >= until_) {  // the link returns: what was sent arrives late
          pid_ = 0;
          for (auto& c : connections_) c.silenced = false;
        }
        for (auto& c : connections_)
          if (!c.silenced) fds.insert(fds.end(), {{c.client, POLLIN, 0}, {c.server, POLLIN, 0}});
      }
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      std::lock_guard guard(mutex_);
      if (fds[0].revents & POLLIN) accept_one();
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto it = std::ranges::find_if(
            connections_, [&](const forwarded& c) { return c.client == fds[i].fd || c.server == fds[i].fd; });
        if (it == connections_.end() || it->silenced) continue;
        const int to = fds[i].fd == it->client ? it->server : it->client;
        char buf[16384];
        const auto n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        if (n <= 0 || !write_all(to, buf, static_cast<std::size_t>(n))) connections_.erase(it);  // both ends closed
      }
    }
  }

  void accept_one() {
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    const int client = ::accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (client < 0) return;
    auto& c = connections_.emplace_back();
    c.client = client;
    c.client_port = ntohs(peer.sin_port);
    c.server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.server < 0 || ::connect(c.server, reinterpret_cast<const sockaddr*>(&target_), sizeof target_) != 0) {
      connections_.pop_back();
      return;
    }
    // A connection the silenced process opens meanwhile (its client reconnecting) is silenced too.
    if (pid_ != 0) {
      const auto ports = tcp_ports_to(pid_, port_);
      c.silenced = std::ranges::find(ports, c.client_port) != ports.end();
    }
  }

  sockaddr_in target_{};
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::list<forwarded> connections_;
  pid_t pid_ = 0;
  instant until_{};
};

session_blackhole::session_blackhole(const std::string& host, std::uint16_t port)
    : engine_(std::make_unique<engine>(host, port)) {}
session_blackhole::~session_blackhole() = default;
std::uint16_t session_blackhole::port() const noexcept { return engine_->port(); }
std::size_t session_blackhole::blackhole(pid_t pid, instant until) { return engine_->blackhole(pid, until); }

std::string routed_through(const std::string& uri, std::uint16_t port) {
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string::npos) return {};
  const auto authority_from = scheme_end + 3;
  const auto authority_end = std::min(uri.find('/', authority_from), uri.find('?', authority_from));
  const auto authority = uri.substr(authority_from, authority_end - authority_from);
  const auto at = authority.rfind('@');
  const auto hosts = at == std::string::npos ? authority : authority.substr(at + 1);
  if (hosts.find(',') != std::string::npos) return {};
  const auto user = at == std::string::npos ? std::string() : authority.substr(0, at + 1);
  return uri.substr(0, authority_from) + user + "127.0.0.1:" + std::to_string(port) +
         (authority_end == std::string::npos ? std::string() : uri.substr(authority_end));
}

}  // namespace dlock::compare
