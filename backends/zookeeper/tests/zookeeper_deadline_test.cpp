// zookeeper:// keeps to the caller's deadline whatever the server does (DLOCK_ZOOKEEPER_URI behind
// a tcp_proxy): every acquire form ends by its deadline plus the grace of its last requests (1 s,
// README "Deadlines"), and dlock::open within connect_timeout, against a server that accepts
// connections and never answers, a port that refuses them, a session being re-established, and a
// client reconnecting. The bounds asserted are correctness bounds with 2 s of slack for a loaded
// machine, never speed claims.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using clock_type = std::chrono::steady_clock;
using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

// What an acquire may take past its deadline here: the backend's grace (1 s) plus slack.
constexpr auto allowed_past_deadline = 3s;

// A loopback port that refuses every connection: bound, never listening.
class refused_port {
 public:
  refused_port() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &length) != 0)
      throw std::runtime_error("refused_port: cannot bind a loopback port");
    port_ = ntohs(a.sin_port);
  }
  ~refused_port() { ::close(fd_); }
  refused_port(const refused_port&) = delete;
  refused_port& operator=(const refused_port&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

// A proxy to the test server that accepts connections and never answers from the start.
std::unique_ptr<dlock::testing::tcp_proxy> silent_server(const std::string& uri) {
  const auto server = dlock::uri::parse(uri).hosts().at(0);
  auto proxy =
      std::make_unique<dlock::testing::tcp_proxy>(server.host, static_cast<std::uint16_t>(server.port_or(2181)));
  proxy->partition();
  return proxy;
}

// One acquire form of one name, with its deadline (clock_type::now() for a try).
struct form {
  std::string what;
  std::chrono::milliseconds wait;
  std::function<dlock::lease(dlock::backend&, const std::string&, std::error_code&)> acquire;
};

std::vector<form> every_form(std::chrono::milliseconds wait) {
  return {
      {"mutex try_acquire_for", wait,
       [wait](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_lock(n)->try_acquire_for(wait, ec);
       }},
      {"mutex try_acquire", 0ms,
       [](dlock::backend& b, const std::string& n, std::error_code& ec) { return b.make_lock(n)->try_acquire(ec); }},
      {"read try_acquire_for", wait,
       [wait](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_rw_lock(n)->try_acquire_read_for(wait, ec);
       }},
      {"write try_acquire_for", wait,
       [wait](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_rw_lock(n)->try_acquire_write_for(wait, ec);
       }},
      {"write try_acquire", 0ms,
       [](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_rw_lock(n)->try_acquire_write(ec);
       }},
      {"semaphore try_acquire_for", wait,
       [wait](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_semaphore(n, 2)->try_acquire_for(wait, ec);
       }},
      {"semaphore try_acquire", 0ms,
       [](dlock::backend& b, const std::string& n, std::error_code& ec) {
         return b.make_semaphore(n, 2)->try_acquire(ec);
       }},
  };
}

// Runs every form once on its own name of `b`, asserting that none is granted and each ends within
// its deadline plus allowed_past_deadline, unavailable. The names used, for the checks after.
std::vector<std::string> every_form_ends_in_time(dlock::backend& b, std::chrono::milliseconds wait,
                                                 const std::string& situation) {
  std::vector<std::string> names;
  for (const auto& f : every_form(wait)) {
    SCOPED_TRACE(f.what + ", " + situation);
    names.push_back(unique_name("deadline"));
    std::error_code ec;
    const auto started = clock_type::now();
    const auto granted = f.acquire(b, names.back(), ec);
    const auto took = clock_type::now() - started;
    EXPECT_FALSE(granted) << "granted with no server answering";
    EXPECT_EQ(ec, dlock::errc::backend_unavailable) << ec.message() << ": " << dlock::last_error_message();
    EXPECT_LE(took, f.wait + allowed_past_deadline)
        << "took " << std::chrono::duration<double>(took).count() << " s for a deadline of "
        << std::chrono::duration<double>(f.wait).count() << " s";
    std::cout << "[ took     ] " << f.what << ", " << situation << ": " << std::chrono::duration<double>(took).count()
              << " s\n";
  }
  return names;
}

// Every contender node of `names` is gone from the server (a withdrawn or timed-out create is
// deleted in the background, or went with its session), so each name can be taken again.
void every_name_is_free_again(const std::string& uri, const std::vector<std::string>& names) {
  auto zh = raw_connect(uri);
  const auto folder_of = [&](const std::string& n) { return zk::parent_path(root_of(uri), n); };
  const auto nodes_left = [&](const std::string& n) {
    return zk::lock_nodes_in_order(children(zh.get(), folder_of(n))).size() +
           children(zh.get(), folder_of(n) + "/leases").size() +
           zk::lock_nodes_in_order(children(zh.get(), folder_of(n) + "/locks")).size();
  };
  const auto deadline = clock_type::now() + 40s;
  for (const auto& n : names) {
    while (nodes_left(n) > 0 && clock_type::now() < deadline) std::this_thread::sleep_for(100ms);
    EXPECT_EQ(nodes_left(n), 0u) << folder_of(n) << " still has nodes of an acquire that was not granted";
  }
  auto fresh = dlock::open(uri);
  for (const auto& n : names) EXPECT_TRUE(fresh->make_lock(n)->try_acquire_for(10s)) << n << " stayed blocked";
}

}  // namespace

// dlock::open waits for a session at most connect_timeout, whatever the server does.
TEST(zookeeper_deadline, OpenEndsWithinConnectTimeout) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto silent = silent_server(uri);
  refused_port refused;
  for (const auto& [what, address] :
       {std::pair{"accepts and never answers", silent->address()}, std::pair{"refuses", refused.address()}}) {
    for (const std::string credentials : {"", "user:secret@"}) {
      SCOPED_TRACE(std::string(what) + (credentials.empty() ? "" : ", with digest credentials"));
      const auto started = clock_type::now();
      try {
        // The session timeout is long: a silent host holds the client 2/3 of it (20 s) before the
        // next attempt, which must not hold open past connect_timeout.
        (void)dlock::open("zookeeper://" + credentials + address + "/dlock?connect_timeout=1500ms&session_timeout=30s");
        ADD_FAILURE() << "open succeeded";
      } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
        EXPECT_NE(std::string(e.what()).find("connect_timeout"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
      }
      const auto took = clock_type::now() - started;
      EXPECT_LE(took, 1500ms + 2s) << "open took " << std::chrono::duration<double>(took).count() << " s";
    }
  }
  EXPECT_GE(silent->connections_accepted(), 1u) << "the client never reached the silent server";
}

// The server goes silent under an established session: first while the client still believes it
// is connected (it notices only 2/3 of a session timeout after the last packet), then while it
// reconnects into the same silence. Before, each acquire waited for the client to give the
// connection up and then rode out a whole session timeout: 10 s for a deadline of 1 s.
TEST(zookeeper_deadline, EveryAcquireEndsByItsDeadlineWhenTheServerGoesSilent) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto server = dlock::uri::parse(uri).hosts().at(0);
  dlock::testing::tcp_proxy proxy(server.host, static_cast<std::uint16_t>(server.port_or(2181)));
  auto b = dlock::open("zookeeper://" + proxy.address() + root_of(uri) + "?session_timeout=10s");
  ASSERT_TRUE(b->make_lock(unique_name("deadline-ok"))->try_acquire()) << "no acquire through the proxy";
  std::vector<std::string> names;
  {
    dlock::testing::partition_guard cut(proxy);
    const auto silent_since = clock_type::now();
    for (const auto& n : every_form_ends_in_time(*b, 500ms, "connected, server silent")) names.push_back(n);
    // The client gives the connection up 2/3 of a session timeout after the last packet, and
    // reconnects into the same silence.
    std::this_thread::sleep_until(silent_since + 7s);
    for (const auto& n : every_form_ends_in_time(*b, 1s, "reconnecting to a silent server")) names.push_back(n);
  }
  every_name_is_free_again(uri, names);
}

// The server's port refuses connections under an established session (the client reconnects in
// vain); then, once the session counts as expired (disconnected for a whole session timeout), a
// new one cannot be established: every acquire still ends by its deadline.
TEST(zookeeper_deadline, EveryAcquireEndsByItsDeadlineWhenConnectionsAreRefused) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto server = dlock::uri::parse(uri).hosts().at(0);
  auto proxy =
      std::make_unique<dlock::testing::tcp_proxy>(server.host, static_cast<std::uint16_t>(server.port_or(2181)));
  auto b = dlock::open("zookeeper://" + proxy->address() + root_of(uri) + "?session_timeout=4s");
  ASSERT_TRUE(b->make_lock(unique_name("deadline-ok"))->try_acquire()) << "no acquire through the proxy";
  proxy.reset();  // closes every connection and the port: reconnects are refused
  const auto refused_since = clock_type::now();
  std::vector<std::string> names = every_form_ends_in_time(*b, 1s, "reconnecting, refused");
  std::this_thread::sleep_until(refused_since + 5s);  // past the session timeout: a new session is needed
  for (const auto& n : every_form_ends_in_time(*b, 1s, "new session, refused")) names.push_back(n);
  every_name_is_free_again(uri, names);
}
