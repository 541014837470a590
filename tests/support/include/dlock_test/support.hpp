#pragma once
// Test support shared by tests/core, tests/conformance and the backends' own tests.
#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace dlock::testing {

// "<prefix>-<24 random hex digits>": parallel runs (and repeated runs against one server) never
// share a lock name.
std::string unique_name(std::string_view prefix);

// The URI of a server the tests run against, from the environment variable `variable`
// (DLOCK_REDIS_URI, DLOCK_ZOOKEEPER_ENSEMBLE_URI, ...; compose/native/dlock-servers exports them).
// Unset or empty, it throws std::runtime_error naming the variable and how to start the servers:
// gtest prints the message and fails the test, from the test body or any helper it calls. A
// backend's own tests never skip for a missing server; leave them out with ctest -E instead.
std::string server_uri(std::string_view variable);
// `uri` under another scheme: with_scheme("redis://h:6379", "redis+fair") is "redis+fair://h:6379".
// Throws std::invalid_argument when `uri` has no "://".
std::string with_scheme(std::string_view uri, std::string_view scheme);

// One backend the conformance suite runs against, as joined by dlock_join_conformance().
struct conformance_target {
  std::string label;    // ctest name part: "memory", "redis_reentrant"
  std::string uri;      // a literal URI, or empty
  std::string uri_env;  // else: the environment variable holding the server's URI
  std::string query;    // appended to the URI ("ttl=1s&x=y")
  std::string scheme;   // replaces the URI's scheme when not empty (mysql:// -> mysql+getlock://)
};

// Every target the build joined (generated from DLOCK_CONFORMANCE_ENTRIES).
const std::vector<conformance_target>& joined_targets();

// The labels and schemes named in DLOCK_TEST_EXCLUDE (comma-separated, spaces ignored).
std::vector<std::string> excluded_names_from_environment();
// The scheme of a target if it can be known without connecting (literal URI, or a set variable).
std::optional<std::string> scheme_of(const conformance_target& t);
bool is_excluded(const conformance_target& t, const std::vector<std::string>& excluded);

// The URI a target runs against, or an error message saying what to do (unset variable).
struct resolved_uri {
  std::optional<std::string> uri;
  std::string error;
};
resolved_uri resolve(const conformance_target& t);
// `uri` with `query` appended (joined by '?' or '&').
std::string with_query(std::string uri, std::string_view query);

// The native launcher (compose/native/dlock-servers, named by DLOCK_SERVERS), for fault tests.
// Both throw std::runtime_error when DLOCK_SERVERS is not set.
// `$DLOCK_SERVERS <args>` ("stop redlock.1", "start zookeeper-ensemble.2"), quietly: its exit status.
int run_launcher(std::string_view args);
// The pid of one running process of the launcher ("zookeeper-ensemble.2"), or -1.
pid_t launcher_pid(std::string_view process);

// Stops a launcher process ("redis", "postgres", "mariadb") for the life of the guard and starts it
// again when the scope ends, whatever the test did in between: an ASSERT must not leave the server
// down for the tests after it.
class stopped_server {
 public:
  explicit stopped_server(std::string process);
  ~stopped_server() { start(); }
  stopped_server(const stopped_server&) = delete;
  stopped_server& operator=(const stopped_server&) = delete;
  bool stopped() const noexcept { return stopped_; }
  // Starts it again now (waiting until it answers); true when it runs.
  bool start();

 private:
  std::string process_;
  bool stopped_ = false;
};

// Waits for a stop token to fire, at most `bound`: true if it fired. The bound is a hang guard or
// the property's deadline, never a speed claim.
bool fires_within(std::stop_token token, std::chrono::milliseconds bound);

// A child process with its stdout on a pipe. The destructor SIGKILLs and reaps a child still running.
class child_process {
 public:
  // argv[0] is the executable path. Throws std::system_error when it cannot be started.
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // The next line of the child's stdout (without '\n'), or nullopt at EOF or after the timeout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  void kill_hard();  // SIGKILL
  // waitpid: the exit code, or 128 + signal number when killed. Waits at most `timeout`, then
  // SIGKILLs the child and returns nullopt.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace dlock::testing
