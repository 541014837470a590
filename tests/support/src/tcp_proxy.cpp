#include "dlock_test/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/uri.hpp"

namespace dlock::testing {
namespace {

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

class fd_owner {
 public:
  fd_owner() = default;
  explicit fd_owner(int fd) noexcept : fd_(fd) {}
  fd_owner(fd_owner&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  fd_owner& operator=(fd_owner&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~fd_owner() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("fcntl");
}

// One direction of one connection: bytes read from `from` and not yet written to `to`.
struct pipe_half {
  std::vector<char> pending;
  bool eof = false;  // `from` closed: shut down `to` for writing once pending is out
};

struct forwarded_connection {
  fd_owner client;
  fd_owner server;
  pipe_half to_server;
  pipe_half to_client;
  bool dead = false;
};

constexpr std::size_t max_pending = 1 << 20;

// Makes the coming close() send RST instead of FIN: the peer sees "connection reset".
void abort_socket(int fd) noexcept {
  const linger abort_on_close{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
}

}  // namespace

class tcp_proxy::engine {
 public:
  engine(std::string host, std::uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr)
      throw std::system_error(std::make_error_code(std::errc::host_unreachable), "tcp_proxy: resolve " + host);
    std::memcpy(&target_, found->ai_addr, sizeof target_);
    ::freeaddrinfo(found);

    listener_ = fd_owner(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener_.get() < 0) throw_errno("socket");
    const int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) throw_errno("bind");
    if (::listen(listener_.get(), 64) != 0) throw_errno("listen");
    socklen_t len = sizeof local;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&local), &len);
    port_ = ntohs(local.sin_port);
    set_nonblocking(listener_.get());

    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("pipe2");
    wake_read_ = fd_owner(wake[0]);
    wake_write_ = fd_owner(wake[1]);
    thread_ = std::thread([this] { run(); });
  }

  ~engine() {
    stopping_ = true;
    wake();
    thread_.join();
  }

  std::uint16_t port() const noexcept { return port_; }
  std::size_t accepted() const noexcept { return accepted_.load(); }

  void set_partitioned(bool cut) {
    partitioned_ = cut;
    wake();
  }
  void reset_connections() {
    reset_requested_ = true;
    wake();
    // Wait until the forwarding thread has closed them, so the caller sees the effect at once.
    while (reset_requested_.load()) std::this_thread::yield();
  }

 private:
  void wake() const noexcept {
    const char byte = 1;
    [[maybe_unused]] auto ignored = ::write(wake_write_.get(), &byte, 1);
  }

  void run() {
    while (!stopping_.load()) {
      if (reset_requested_.load()) {
        for (auto& c : connections_) {
          abort_socket(c.client.get());
          abort_socket(c.server.get());
        }
        connections_.clear();
        reset_requested_ = false;
      }
      const bool cut = partitioned_.load();
      std::vector<pollfd> fds{{wake_read_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
      const std::size_t polled = connections_.size();  // accept_all() may append more below
      for (auto& c : connections_) {
        // While cut, watch nothing: the kernel buffers fill up and then both sides block, as on a
        // real link that drops every packet.
        const short to_client_events = cut ? 0 : events_for(c.to_server, c.to_client);
        const short to_server_events = cut ? 0 : events_for(c.to_client, c.to_server);
        fds.push_back({c.client.get(), to_client_events, 0});
        fds.push_back({c.server.get(), to_server_events, 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
      if (fds[0].revents & POLLIN) {
        char drain[64];
        while (::read(wake_read_.get(), drain, sizeof drain) > 0) {
        }
      }
      if (fds[1].revents & POLLIN) accept_all();
      if (cut) continue;
      auto c = connections_.begin();
      for (std::size_t i = 0; i < polled; ++i, ++c) {
        pump(*c, c->client.get(), fds[2 + 2 * i].revents, c->server.get(), fds[3 + 2 * i].revents);
      }
      connections_.remove_if([](const forwarded_connection& c) { return c.dead; });
    }
  }

  // What to wait for on one socket: readable while its outgoing buffer has room, writable while
  // the other direction has bytes for it.
  static short events_for(const pipe_half& outgoing, const pipe_half& incoming) {
    short events = 0;
    if (!outgoing.eof && outgoing.pending.size() < max_pending) events |= POLLIN;
    if (!incoming.pending.empty()) events |= POLLOUT;
    return events;
  }

  void accept_all() {
    for (;;) {
      fd_owner client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (client.get() < 0) return;
      ++accepted_;  // before connecting on: once the server sees the connection, it is counted
      fd_owner server(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (server.get() < 0 || ::connect(server.get(), reinterpret_cast<const sockaddr*>(&target_), sizeof target_) != 0)
        continue;  // the client sees its connection closed, as with a refused port
      set_nonblocking(server.get());
      const int one = 1;
      ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(server.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      connections_.push_back({std::move(client), std::move(server), {}, {}, false});
    }
  }

  static void pump(forwarded_connection& c, int client, short client_events, int server, short server_events) {
    if ((client_events | server_events) & (POLLERR | POLLNVAL)) {
      c.dead = true;
      return;
    }
    if (client_events & (POLLIN | POLLHUP)) read_into(client, c.to_server, c);
    if (server_events & (POLLIN | POLLHUP)) read_into(server, c.to_client, c);
    if (server_events & POLLOUT) write_from(server, c.to_server, c);
    if (client_events & POLLOUT) write_from(client, c.to_client, c);
    if (c.to_server.eof && c.to_client.eof && c.to_server.pending.empty() && c.to_client.pending.empty()) c.dead = true;
  }

  static void read_into(int fd, pipe_half& half, forwarded_connection& c) {
    if (half.eof) return;
    char buffer[16384];
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      half.pending.insert(half.pending.end(), buffer, buffer + n);
    } else if (n == 0) {
      half.eof = true;
    } else if (errno != EAGAIN && errno != EINTR) {
      c.dead = true;
    }
  }

  static void write_from(int fd, pipe_half& half, forwarded_connection& c) {
    const auto n = ::send(fd, half.pending.data(), half.pending.size(), MSG_NOSIGNAL);
    if (n > 0) {
      half.pending.erase(half.pending.begin(), half.pending.begin() + n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      c.dead = true;
      return;
    }
    if (half.eof && half.pending.empty()) ::shutdown(fd, SHUT_WR);
  }

  sockaddr_in target_{};
  fd_owner listener_;
  fd_owner wake_read_;
  fd_owner wake_write_;
  std::uint16_t port_ = 0;
  std::list<forwarded_connection> connections_;  // only the forwarding thread touches it
  std::atomic<bool> partitioned_{false};
  std::atomic<bool> reset_requested_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> accepted_{0};
  std::thread thread_;
};

tcp_proxy::tcp_proxy(std::string target_host, std::uint16_t target_port)
    : engine_(std::make_unique<engine>(std::move(target_host), target_port)) {}

tcp_proxy::~tcp_proxy() = default;

std::uint16_t tcp_proxy::port() const noexcept { return engine_->port(); }
std::string tcp_proxy::address() const { return "127.0.0.1:" + std::to_string(port()); }
void tcp_proxy::partition() { engine_->set_partitioned(true); }
void tcp_proxy::heal() { engine_->set_partitioned(false); }
void tcp_proxy::reset_connections() { engine_->reset_connections(); }
std::size_t tcp_proxy::connections_accepted() const { return engine_->accepted(); }

namespace {

// How the URI text spells a server: the form the replacement looks for.
std::string spelled(const dlock::host_port& h) { return h.host + ":" + std::to_string(h.port_or(0)); }

}  // namespace

std::string through(const std::string& uri, const tcp_proxy& proxy) {
  const auto u = dlock::uri::parse(uri);
  const std::string hostport = spelled(u.hosts().front());
  auto out = uri;
  const auto at = out.find(hostport);
  if (at != std::string::npos) out.replace(at, hostport.size(), proxy.address());
  return out;
}

std::vector<std::unique_ptr<tcp_proxy>> proxies_for(const std::string& uri) {
  std::vector<std::unique_ptr<tcp_proxy>> proxies;
  for (const auto& h : dlock::uri::parse(uri).hosts())
    proxies.push_back(std::make_unique<tcp_proxy>(h.host, static_cast<std::uint16_t>(h.port_or(0))));
  return proxies;
}

std::string through(const std::string& uri, const std::vector<std::unique_ptr<tcp_proxy>>& proxies) {
  const auto hosts = dlock::uri::parse(uri).hosts();
  auto out = uri;
  std::size_t from = 0;  // each replacement after the last: a proxy's address never matches a later host
  for (std::size_t i = 0; i < hosts.size() && i < proxies.size(); ++i) {
    const std::string hostport = spelled(hosts[i]);
    const auto at = out.find(hostport, from);
    if (at == std::string::npos) continue;
    out.replace(at, hostport.size(), proxies[i]->address());
    from = at + proxies[i]->address().size();
  }
  return out;
}

}  // namespace dlock::testing
