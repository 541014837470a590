#include "dlock_compare/network_partition.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <system_error>

#include "dlock_compare/tcp_forwarder.hpp"

extern char** environ;

namespace dlock::compare {

namespace {

constexpr const char* name_prefix = "dlkc-";  // dlkc-PID-hub, dlkc-PID-cI
constexpr const char* hub_address = "10.213.255.1";

struct command_result {
  int status = -1;     // exit status, -1 when it did not run or was killed
  std::string output;  // stdout and stderr
};

// `ip ARGS...`, its output captured (bounded by what ip prints: a line or two).
command_result run_ip(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "ip", &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  command_result r;
  if (rc != 0) {
    ::close(pipe_fds[0]);
    r.output = std::string("cannot run ip: ") + std::strerror(rc);
    return r;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  while (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
  return r;
}

void ip(const std::vector<std::string>& args) {
  const auto r = run_ip(args);
  if (r.status == 0) return;
  std::string line = "ip";
  for (const auto& a : args) line += " " + a;
  throw std::runtime_error("the partition's network could not be set up: `" + line + "` failed: " + r.output);
}

std::string client_subnet(std::uint32_t client, int host) {
  return "10.213." + std::to_string(client) + "." + std::to_string(host);
}

}  // namespace

std::vector<std::string> network_namespaces() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec))
    names.push_back(entry.path().filename());
  return names;
}

std::string network_partition::unavailable_because() {
  if (::geteuid() != 0) return "network namespaces need root (ip netns add)";
  const auto r = run_ip({"-V"});
  if (r.status != 0) return "no `ip` (iproute2) to make network namespaces: " + r.output;
  return {};
}

void network_partition::sweep_stale() {
  static const std::regex ours("dlkc-([0-9]+)-.*");
  for (const auto& name : network_namespaces()) {
    std::smatch m;
    if (!std::regex_match(name, m, ours)) continue;
    const auto pid = static_cast<pid_t>(std::stol(m[1]));
    if (::kill(pid, 0) != 0 && errno == ESRCH) run_ip({"netns", "delete", name});
  }
}

std::vector<std::uint16_t> network_partition::loopback_ports(const std::string& uri) {
  const auto at = uri.find("://");
  if (at == std::string::npos) return {};
  auto authority = uri.substr(at + 3, uri.find_first_of("/?", at + 3) - (at + 3));
  authority = authority.substr(authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@') + 1);
  static const std::regex host_port("(127\\.0\\.0\\.1|localhost):([0-9]+)");
  std::vector<std::uint16_t> ports;
  std::size_t hosts = 0;
  for (std::size_t from = 0; from <= authority.size(); ++hosts) {
    const auto comma = authority.find(',', from);
    const auto host = authority.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    std::smatch m;
    if (!std::regex_match(host, m, host_port)) return {};
    ports.push_back(static_cast<std::uint16_t>(std::stoul(m[2])));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return ports;
}

network_partition::network_partition(std::uint32_t clients, const std::vector<std::uint16_t>& server_ports) {
  static std::atomic<unsigned> networks_made{0};  // several in one process (a test) need their own names
  const auto run = name_prefix + std::to_string(::getpid()) + "-" + std::to_string(networks_made++);
  hub_ = run + "-hub";
  try {
    ip({"netns", "add", hub_});
    ip({"-n", hub_, "link", "set", "lo", "up"});
    ip({"-n", hub_, "address", "add", std::string(hub_address) + "/32", "dev", "lo"});
    for (std::uint32_t i = 1; i <= clients; ++i) {
      const auto ns = run + "-c" + std::to_string(i);
      ip({"netns", "add", ns});
      clients_.push_back(ns);
      const auto hub_end = "h" + std::to_string(i);
      ip({"-n", ns, "link", "set", "lo", "up"});
      ip({"-n", hub_, "link", "add", hub_end, "type", "veth", "peer", "name", "v0", "netns", ns});
      ip({"-n", hub_, "address", "add", client_subnet(i, 1) + "/30", "dev", hub_end});
      ip({"-n", hub_, "link", "set", hub_end, "up"});
      ip({"-n", ns, "address", "add", client_subnet(i, 2) + "/30", "dev", "v0"});
      ip({"-n", ns, "link", "set", "v0", "up"});
      ip({"-n", ns, "route", "add", std::string(hub_address) + "/32", "via", client_subnet(i, 1), "dev", "v0"});
    }
    for (const auto port : server_ports)
      forwarders_.push_back(std::make_unique<tcp_forwarder>("/run/netns/" + hub_, hub_address, port));
  } catch (...) {
    forwarders_.clear();
    for (const auto& ns : namespaces()) run_ip({"netns", "delete", ns});
    throw;
  }
}

network_partition::~network_partition() {
  forwarders_.clear();
  for (const auto& ns : namespaces()) run_ip({"netns", "delete", ns});  // the veths go with them
}

std::vector<std::string> network_partition::launch_prefix(std::uint32_t client) const {
  return {"ip", "netns", "exec", clients_.at(client - 1)};
}

std::string network_partition::reachable_uri(const std::string& uri) const {
  static const std::regex loopback("(127\\.0\\.0\\.1|localhost):");
  const auto at = uri.find("://");
  const auto end = uri.find_first_of("/?", at + 3);
  return uri.substr(0, at + 3) +
         std::regex_replace(uri.substr(at + 3, end - (at + 3)), loopback, std::string(hub_address) + ":") +
         (end == std::string::npos ? "" : uri.substr(end));
}

void network_partition::cut(std::uint32_t client) {
  ip({"-n", hub_, "link", "set", "h" + std::to_string(client), "down"});
}

void network_partition::heal(std::uint32_t client) {
  ip({"-n", hub_, "link", "set", "h" + std::to_string(client), "up"});
}

std::vector<std::string> network_partition::namespaces() const {
  std::vector<std::string> all = {hub_};
  all.insert(all.end(), clients_.begin(), clients_.end());
  return all;
}

}  // namespace dlock::compare
