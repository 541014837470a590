// zookeeper:// on the launcher's three-node ensemble (DLOCK_ZOOKEEPER_ENSEMBLE_URI, and
// DLOCK_SERVERS to stop, start and freeze nodes): one node down, a follower frozen during a release
// and an acquire, two nodes down (no quorum).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

// DLOCK_ZOOKEEPER_ENSEMBLE_PORTS, "p1,p2,p3": the client ports in node order.
std::vector<std::string> ensemble_ports() {
  std::vector<std::string> out;
  const char* ports = std::getenv("DLOCK_ZOOKEEPER_ENSEMBLE_PORTS");
  std::stringstream list(ports ? ports : "");
  for (std::string p; std::getline(list, p, ',');) out.push_back(p);
  return out;
}

// "leader", "follower" or "standalone" from the server's srvr answer; "" if it does not serve.
std::string server_mode(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval two_seconds{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof two_seconds);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::write(fd, "srvr", 4) == 4) {
    char buf[512];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto at = answer.find("Mode: ");
  if (at == std::string::npos) return {};
  return answer.substr(at + 6, answer.find('\n', at) - at - 6);
}

// The ensemble tests stop and freeze nodes. Whatever happens in the test (an ASSERT returns
// early), the destructor puts every node back and waits until each one serves a session again: a
// node that is back but still electing would fail the next test (the conformance suite's
// zookeeper_ensemble runs right after these).
class ensemble_disturbance {
 public:
  explicit ensemble_disturbance(std::string uri) : uri_(std::move(uri)) {}
  ensemble_disturbance(const ensemble_disturbance&) = delete;
  ensemble_disturbance& operator=(const ensemble_disturbance&) = delete;
  ~ensemble_disturbance() {
    for (const int pid : frozen_) ::kill(pid, SIGCONT);
    for (const auto& node : stopped_)
      EXPECT_EQ(dlock::testing::run_launcher("start " + node), 0) << "could not restart " << node;
    wait_until_every_node_serves();
  }
  // "zookeeper-ensemble.1": stopped (SIGTERM) now, started again at the end.
  bool stop(const std::string& node) {
    if (dlock::testing::run_launcher("stop " + node) != 0) return false;
    stopped_.push_back(node);
    return true;
  }
  // SIGSTOP (a long JVM pause), SIGCONT at the end or by thaw().
  bool freeze(int pid) {
    if (::kill(pid, SIGSTOP) != 0) return false;
    frozen_.push_back(pid);
    return true;
  }
  void thaw() {
    for (const int pid : frozen_) ::kill(pid, SIGCONT);
    frozen_.clear();
  }

 private:
  void wait_until_every_node_serves() const {
    const auto u = dlock::uri::parse(uri_);
    for (const auto& h : u.hosts()) {
      const auto one = h.host + ":" + std::to_string(h.port_or(2181));
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      bool serves = false;
      while (!serves && std::chrono::steady_clock::now() < deadline) {
        zh_ptr zh(zookeeper_init(one.c_str(), nullptr, 4000, nullptr, nullptr, 0));
        for (int i = 0; i < 40 && zh && zoo_state(zh.get()) != ZOO_CONNECTED_STATE; ++i)
          std::this_thread::sleep_for(25ms);
        Stat st{};
        serves = zh && zoo_state(zh.get()) == ZOO_CONNECTED_STATE && zoo_exists(zh.get(), "/", 0, &st) == ZOK;
        if (!serves) std::this_thread::sleep_for(200ms);
      }
      EXPECT_TRUE(serves) << one << " does not serve sessions 60 s after the test put it back";
    }
  }

  std::string uri_;
  std::vector<std::string> stopped_;
  std::vector<int> frozen_;
};

}  // namespace
TEST(zookeeper_ensemble, OneNodeDownLockSurvivesAndWaitersStillGetItInOrder) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_ENSEMBLE_URI");
  ensemble_disturbance disturbance(uri);
  auto b = dlock::open(uri + "?session_timeout=6s");
  const auto name = unique_name("one-down");
  auto held = b->make_lock(name)->acquire();
  auto w1 = b->make_lock(name), w2 = b->make_lock(name);
  auto zh = raw_connect(uri);
  const auto parent = zk::parent_path(root_of(uri), name);
  std::vector<int> order;
  std::mutex m;
  // A thread that waits on `lock` and writes `who` in the order when it gets it (-who on an error).
  const auto wait_in_line = [&](dlock::distributed_lock& lock, int who) {
    return std::thread([&, waiter = &lock, who] {
      std::error_code ec;
      auto l = waiter->acquire(ec);
      std::lock_guard g(m);
      order.push_back(ec ? -who : who);
    });
  };
  std::thread t1 = wait_in_line(*w1, 1);
  wait_for_contenders(zh.get(), parent, 2);
  std::thread t2 = wait_in_line(*w2, 2);
  wait_for_contenders(zh.get(), parent, 3);
  ASSERT_TRUE(disturbance.stop("zookeeper-ensemble.1"));
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(held.held()) << "losing one node of three must not lose the lock";
  held.release();
  t1.join();
  t2.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// The CI failure this guards against: a server stalls (a JVM pause on a loaded machine) while we
// delete our node; the delete times out and the client moves to another server, the session
// alive. The release must retry there and succeed, not fail and leave the node blocking the name;
// an acquire caught by the same stall must redo its create there, once. The frozen server is a
// follower: a frozen leader stops the whole ensemble until an election (syncLimit, 5 s here).
TEST(zookeeper_ensemble, ReleaseAndAcquireRideOutAFollowerThatFreezes) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_ENSEMBLE_URI");
  const auto ports = ensemble_ports();
  ASSERT_EQ(ports.size(), 3u) << "DLOCK_ZOOKEEPER_ENSEMBLE_PORTS should list the 3 client ports";
  ensemble_disturbance disturbance(uri);
  // A session on a follower: the client picks a server at random, so open until it picks one.
  const auto name = unique_name("freeze");
  std::shared_ptr<dlock::backend> b;
  dlock::lease held;
  std::size_t node = 0;
  for (int attempt = 0; attempt < 30 && !held; ++attempt) {
    b = dlock::open(uri + "?session_timeout=6s");
    auto candidate = b->make_lock(name)->acquire();
    const auto server = zk::connected_server(*candidate.state());
    ASSERT_TRUE(server) << "the session is not connected to any server";
    const auto port = server->substr(server->rfind(':') + 1);
    for (std::size_t i = 0; i < ports.size(); ++i)
      if (ports[i] == port && server_mode(std::stoi(port)) == "follower") {
        node = i + 1;
        held = std::move(candidate);
      }
  }
  ASSERT_TRUE(held) << "no session landed on a follower in 30 tries";
  const auto pid = dlock::testing::launcher_pid("zookeeper-ensemble." + std::to_string(node));
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(disturbance.freeze(pid));
  const auto second = unique_name("freeze-acquire");
  std::error_code acquire_ec;
  dlock::lease second_lease;
  std::thread acquirer([&] { second_lease = b->make_lock(second)->try_acquire_for(30s, acquire_ec); });
  std::error_code ec;
  held.release(ec);
  acquirer.join();
  EXPECT_FALSE(ec) << "release failed while the session could move to another server: " << ec.message();
  EXPECT_FALSE(acquire_ec) << "acquire failed while the session could move to another server: " << acquire_ec.message();
  EXPECT_TRUE(second_lease) << "a free name was not acquired";
  disturbance.thaw();
  auto zh = raw_connect(uri);
  EXPECT_EQ(zk::lock_nodes_in_order(children(zh.get(), zk::parent_path(root_of(uri), second))).size(), 1u)
      << "the lost create left a second node of ours in the queue";
  auto other = dlock::open(uri + "?session_timeout=6s");
  auto next = other->make_lock(name)->try_acquire_for(10s, ec);
  EXPECT_TRUE(next) << "the name stayed blocked after the release: " << ec.message();
}

TEST(zookeeper_ensemble, TwoNodesDownHolderToldLostAndNobodyElseAcquires) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_ENSEMBLE_URI");
  ensemble_disturbance disturbance(uri);
  collected_diagnostics diagnostics;
  const auto collecting_since = std::chrono::steady_clock::now();
  auto b = dlock::open(uri + "?session_timeout=4s");
  auto other = dlock::open(uri + "?session_timeout=4s");
  const auto name = unique_name("two-down");
  auto held = b->make_lock(name)->acquire();
  ASSERT_TRUE(disturbance.stop("zookeeper-ensemble.1"));
  ASSERT_TRUE(disturbance.stop("zookeeper-ensemble.2"));
  // No quorum: nobody can acquire; the holder is told once its session can no longer be kept.
  std::error_code ec;
  auto stolen = other->make_lock(name)->try_acquire_for(3s, ec);
  EXPECT_FALSE(stolen) << "acquired without a quorum";
  for (int i = 0; i < 400 && !held.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "the holder was not told the lock is lost";
  // Meanwhile both clients cycled through the three hosts, logging at each attempt and alternating
  // between the hosts' lines (~115 times each in 5 s before): each distinct line is reported at
  // most once per quiet period (10 s), its repeats counted in it.
  const auto quiet_periods = 1 + (std::chrono::steady_clock::now() - collecting_since) / std::chrono::seconds(10);
  std::map<std::string, int> times_reported;
  for (const auto& line : diagnostics.lines())
    if (line.starts_with("zookeeper client: ")) ++times_reported[line.substr(0, line.find(" (repeated "))];
  for (const auto& [line, times] : times_reported)
    EXPECT_LE(times, quiet_periods) << "reported " << times << " times in " << quiet_periods
                                    << " quiet period(s): " << line;
}
