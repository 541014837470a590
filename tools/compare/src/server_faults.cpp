#include "dlock_compare/server_faults.hpp"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "dlock/uri.hpp"
#include "dlock_compare/families.hpp"

namespace dlock::compare {

namespace {

namespace fs = std::filesystem;

// The inodes of `pid`'s sockets ("socket:[INODE]" links in /proc/PID/fd).
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const auto target = fs::read_symlink(fd.path(), ec).string();
    if (!ec && target.starts_with("socket:[") && target.ends_with("]"))
      inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

std::uint16_t hex_port(const std::string& address) {  // "0100007F:D431" -> 54321
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? 0
                                    : static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1), nullptr, 16));
}

// The pids of `roots` and of all their descendants (from /proc/*/stat's ppid).
std::vector<pid_t> with_descendants(std::vector<pid_t> roots) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::ranges::all_of(name, [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');  // the command may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent_of.emplace_back(std::stoi(name), ppid);
  }
  for (std::size_t i = 0; i < roots.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == roots[i] && std::ranges::find(roots, pid) == roots.end()) roots.push_back(pid);
  return roots;
}

}  // namespace

std::vector<std::uint16_t> tcp_ports_to(pid_t pid, std::uint16_t server_port) {
  const auto inodes = socket_inodes(pid);
  std::vector<std::uint16_t> ports;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in("/proc/" + std::to_string(pid) + table);  // the pid's own network namespace
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "01" && hex_port(remote) == server_port && inodes.contains(inode)) ports.push_back(hex_port(local));
    }
  }
  return ports;
}

std::string connection_kill_not_applicable(std::string_view scheme) {
  const auto* family = family_of_scheme(scheme);
  if (family == nullptr || family->variable == nullptr) return "no server connection to kill";
  return family->kill == connection_kill::not_applicable ? std::string(family->connection_kill_not_applicable)
                                                         : std::string();
}

std::uint16_t server_port_of(const std::string& uri) {
  const auto u = dlock::uri::parse(uri);
  const auto* family = family_of_scheme(u.scheme());
  const std::uint16_t fallback = family != nullptr ? family->default_port : 0;
  return u.hosts().empty() ? fallback : u.hosts().front().port_or(fallback);
}

killed_connections kill_connections_on_server(const std::string& uri, const std::vector<std::uint16_t>& client_ports) {
  if (client_ports.empty()) return no_kill("the holder has no connection to the server");
  const auto u = dlock::uri::parse(uri);
  if (u.hosts().empty()) return no_kill("the URI names no server");
  const auto* family = family_of_scheme(u.scheme());
  if (family == nullptr || family->kill != connection_kill::server_command || family->kill_connections == nullptr)
    return no_kill(connection_kill_not_applicable(u.scheme()));
  try {
    return family->kill_connections(u, client_ports);
  } catch (const std::exception& e) {  // a number the tool printed that is not one
    return no_kill(std::string("unexpected answer from the server's tool: ") + e.what());
  }
}

frozen_server::frozen_server(const std::filesystem::path& launcher, const std::string& process) {
  const auto r = run_tool({launcher.string(), "pid", process}, {});
  std::vector<pid_t> roots;
  std::istringstream in(r.output);
  for (pid_t pid = 0; in >> pid;) roots.push_back(pid);
  if (r.exit_code != 0 || roots.empty()) {
    why_not_ = "the launcher gave no pid for " + process + ": " + first_line(r.output);
    return;
  }
  // The parents first, then their children listed: a stopped parent forks no new one.
  for (const auto pid : roots)
    if (::kill(pid, SIGSTOP) == 0) pids_.push_back(pid);
  for (const auto pid : with_descendants(roots))
    if (std::ranges::find(pids_, pid) == pids_.end() && ::kill(pid, SIGSTOP) == 0) pids_.push_back(pid);
  if (pids_.empty()) why_not_ = "no process of " + process + " could be stopped";
}

frozen_server::~frozen_server() { resume(); }

void frozen_server::resume() noexcept {
  for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) ::kill(*it, SIGCONT);
  pids_.clear();
}

}  // namespace dlock::compare
