#pragma once
// Helpers shared by the zookeeper tests (zookeeper_test's files on the mutex and
// zookeeper_primitives_test's on the reader-writer lock and the semaphore): a raw ZooKeeper handle
// to look at the nodes the backend made, the server's four-letter words (four_letter.hpp), what reaches dlock's
// background error handler, and a kazoo peer (tests/kazoo_peer.py) holding a node with one of
// kazoo's recipes.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "four_letter.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper::testing {

using namespace std::chrono_literals;
using dlock::testing::server_uri;
using dlock::testing::unique_name;

struct zh_close {
  void operator()(zhandle_t* zh) const noexcept { zookeeper_close(zh); }
};
using zh_ptr = std::unique_ptr<zhandle_t, zh_close>;

// The connect string of a zookeeper:// URI: every host, "host:port", comma-separated.
inline std::string hosts_of(const std::string& text) {
  std::string hosts;
  for (const auto& h : dlock::uri::parse(text).hosts())
    hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port_or(2181));
  return hosts;
}

// A plain client handle, connected (or the test fails); with `id`, it takes over that session.
inline zh_ptr raw_connect(const std::string& text, const clientid_t* id = nullptr) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zh_ptr zh(zookeeper_init(hosts_of(text).c_str(), nullptr, 4000, id, nullptr, 0));
  for (int i = 0; i < 400 && zoo_state(zh.get()) != ZOO_CONNECTED_STATE; ++i) std::this_thread::sleep_for(25ms);
  EXPECT_EQ(zoo_state(zh.get()), ZOO_CONNECTED_STATE);
  return zh;
}

// The names of the children of `path`; none if it cannot be read.
inline std::vector<std::string> children(zhandle_t* zh, const std::string& path) {
  String_vector v{0, nullptr};
  std::vector<std::string> out;
  if (zoo_get_children(zh, path.c_str(), 0, &v) == ZOK)
    for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
  deallocate_String_vector(&v);
  return out;
}

// Children of any kind: waiting on these does not depend on which ones the backend counts.
inline void wait_for_children(zhandle_t* zh, const std::string& parent, std::size_t n) {
  for (int i = 0; i < 1000 && children(zh, parent).size() < n; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(children(zh, parent).size(), n) << parent;
}

// Lock nodes of any recipe, as the backend counts its contenders (sequence.hpp).
inline void wait_for_contenders(zhandle_t* zh, const std::string& parent, std::size_t n) {
  for (int i = 0; i < 400 && lock_nodes_in_order(children(zh, parent)).size() < n; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(lock_nodes_in_order(children(zh, parent)).size(), n);
}

// The czxid of the node at `path` (the zxid of its create: the fencing token of a grant it
// holds); none if it cannot be read.
inline std::optional<std::uint64_t> czxid_of(zhandle_t* zh, const std::string& path) {
  Stat st{};
  if (zoo_exists(zh, path.c_str(), 0, &st) != ZOK) return std::nullopt;
  return static_cast<std::uint64_t>(st.czxid);
}

// The URI's path without trailing slashes: the root the backend puts its folders under.
inline std::string root_of(const std::string& text) {
  auto p = dlock::uri::parse(text).path();
  while (!p.empty() && p.back() == '/') p.pop_back();
  return p;
}

// What a test of the nodes of one name starts from: DLOCK_ZOOKEEPER_URI, a backend on it, a fresh
// name (`what` and a random suffix), the folder its nodes go in, and a raw handle to look at them.
struct name_in_view {
  std::string uri;
  std::shared_ptr<dlock::backend> b;
  std::string name;
  std::string parent;
  zh_ptr zh;
};

inline name_in_view fresh_name_in_view(const std::string& what) {
  name_in_view v;
  v.uri = server_uri("DLOCK_ZOOKEEPER_URI");
  v.b = dlock::open(v.uri);
  v.name = unique_name(what);
  v.parent = parent_path(root_of(v.uri), v.name);
  v.zh = raw_connect(v.uri);
  return v;
}

// Collects what reaches dlock's background error handler; the previous handler comes back at the end.
class collected_diagnostics {
 public:
  collected_diagnostics()
      : previous_(dlock::set_background_error_handler([this](std::error_code, std::string_view message) {
          std::lock_guard guard(mutex_);
          lines_.emplace_back(message);
        })) {}
  ~collected_diagnostics() { dlock::set_background_error_handler(previous_); }
  collected_diagnostics(const collected_diagnostics&) = delete;
  collected_diagnostics& operator=(const collected_diagnostics&) = delete;
  std::vector<std::string> lines() {
    std::lock_guard guard(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
  dlock::background_error_handler previous_;
};

// The clock the kazoo peer reports its events in (CLOCK_MONOTONIC, as Python's time.monotonic).
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// tests/kazoo_peer.py: a kazoo client holding `path` with one of kazoo's recipes until release()
// (at the latest when the test ends, whatever it asserted).
class kazoo_peer {
 public:
  kazoo_peer(const std::string& uri, const std::string& path, const std::string& kind,
             std::vector<std::string> extra_patterns = {})
      : release_file_(std::filesystem::temp_directory_path() /
                      (dlock::testing::unique_name("kazoo-release") + ".flag")),
        child_(arguments(uri, path, kind, extra_patterns)) {}
  ~kazoo_peer() {
    release();
    (void)child_.wait(20s);
    std::filesystem::remove(release_file_);
  }
  kazoo_peer(const kazoo_peer&) = delete;
  kazoo_peer& operator=(const kazoo_peer&) = delete;

  // Waits for the peer's "<event> <t>" line ("acquired", "released"): t in steady_seconds(), or nullopt.
  std::optional<double> wait_for(std::string_view event, std::chrono::milliseconds timeout) {
    const auto line = child_.read_line(timeout);
    if (!line || !line->starts_with(std::string(event) + " ")) {
      ADD_FAILURE() << "kazoo peer: expected '" << event << " <t>', got '" << line.value_or("<nothing>") << "'";
      return std::nullopt;
    }
    return std::stod(line->substr(event.size() + 1));
  }
  void release() { std::ofstream(release_file_).put('\n'); }
  // The peer's exit status once it has exited (its node deleted: "released" comes just before the
  // delete), or nullopt at the timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) { return child_.wait(timeout); }

 private:
  std::vector<std::string> arguments(const std::string& uri, const std::string& path, const std::string& kind,
                                     const std::vector<std::string>& extra_patterns) const {
    std::vector<std::string> argv{
        "/usr/bin/python3",    DLOCK_ZOOKEEPER_TEST_DIR "/kazoo_peer.py", hosts_of(uri), path, kind,
        release_file_.string()};
    argv.insert(argv.end(), extra_patterns.begin(), extra_patterns.end());
    return argv;
  }

  std::filesystem::path release_file_;
  dlock::testing::child_process child_;
};

}  // namespace dlock::zookeeper::testing
