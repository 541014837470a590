// zookeeper:// bad input and the client library's log: unknown hosts are refused as unavailable
// and named, and the C client's log reaches dlock's background error handler, never stderr.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"
#include "zk_test_support.hpp"

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

// Everything written to file descriptor 2 for the life of the guard (the C client logs with
// fprintf(stderr)); restored whatever the test asserted.
class stderr_capture {
 public:
  stderr_capture() : file_(std::filesystem::temp_directory_path() / (unique_name("stderr") + ".txt")) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~stderr_capture() {
    restore();
    std::filesystem::remove(file_);
  }
  stderr_capture(const stderr_capture&) = delete;
  stderr_capture& operator=(const stderr_capture&) = delete;
  std::string text() {
    restore();
    std::ifstream in(file_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::filesystem::path file_;
  int saved_ = -1;
};
}  // namespace

TEST(zookeeper_input, UnknownHostIsUnavailableAndNamed) {
  try {
    (void)dlock::open("zookeeper://no-such-host.invalid:2181,other-host.invalid:2181/dlock?connect_timeout=2s");
    FAIL() << "open succeeded with unknown hosts";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
    for (const auto* expected : {"cannot resolve", "'no-such-host.invalid'", "'other-host.invalid'"})
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

// A failed connect says what failed in its exception and nothing on stderr; once a session is up,
// the client's complaints (here: the connection reset under it) reach the background error handler.
TEST(zookeeper_input, ClientLogGoesToDiagnosticsNeverToStderr) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto server = dlock::uri::parse(uri).hosts().at(0);
  dlock::testing::tcp_proxy proxy(server.host, static_cast<std::uint16_t>(server.port_or(2181)));
  stderr_capture captured;
  collected_diagnostics diagnostics;
  try {
    (void)dlock::open("zookeeper://127.0.0.1:1/dlock?connect_timeout=1500ms");
    ADD_FAILURE() << "open succeeded with nothing listening";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
  }
  EXPECT_TRUE(diagnostics.lines().empty())
      << "a failed open reports through its exception, not the handler: " << diagnostics.lines().front();
  {
    auto b = dlock::open("zookeeper://" + proxy.address() + root_of(uri) + "?session_timeout=4s");
    auto held = b->make_lock(unique_name("log"))->acquire();
    proxy.reset_connections();
    for (int i = 0; i < 200 && diagnostics.lines().empty(); ++i) std::this_thread::sleep_for(25ms);
    // The session rides out the reset (the client reconnects through the proxy): still held.
    for (int i = 0; i < 200 && !held.held(); ++i) std::this_thread::sleep_for(25ms);
    EXPECT_TRUE(held.held()) << held.lost_reason().message();
  }
  const auto err = captured.text();
  EXPECT_TRUE(err.empty()) << "written to stderr: " << err;
  const auto lines = diagnostics.lines();
  ASSERT_FALSE(lines.empty()) << "the client's complaint about the reset connection did not reach the handler";
  const auto routed = std::find_if(lines.begin(), lines.end(),
                                   [](const std::string& l) { return l.starts_with("zookeeper client: ZOO_ERROR"); });
  ASSERT_NE(routed, lines.end()) << "no client line among what the handler got, the first: " << lines.front();
  std::cout << "[ routed   ] " << lines.size() << " line(s), e.g. " << *routed << "\n";
}
