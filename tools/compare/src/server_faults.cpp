#include "dlock_compare/server_faults.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "dlock/uri.hpp"

extern char** environ;

namespace dlock::compare {

namespace {

namespace fs = std::filesystem;

killed_connections failed(std::string why) {
  killed_connections k;
  k.not_injected = std::move(why);
  return k;
}

std::string_view family_of(std::string_view scheme) { return scheme.substr(0, scheme.find('+')); }

// The inodes of `pid`'s sockets ("socket:[INODE]" links in /proc/PID/fd).
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const auto target = fs::read_symlink(fd.path(), ec).string();
    if (!ec && target.starts_with("socket:[") && target.ends_with("]")) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

std::uint16_t hex_port(const std::string& address) {  // "0100007F:D431" -> 54321
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1), nullptr, 16));
}

struct tool_run {
  int exit_code = -1;  // -1: it could not be run
  std::string output;  // stdout and stderr
};

// Runs `argv` (looked up in PATH) with `extra_env` added to the environment, stdin /dev/null,
// stdout and stderr captured. The password travels in `extra_env`, never in argv (which `ps` shows).
tool_run run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  tool_run r;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const auto& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    r.output = argv[0] + ": cannot be run (is it installed?)";
    return r;
  }
  char buf[4096];
  for (;;) {
    const auto n = ::read(out[0], buf, sizeof buf);
    if (n > 0)
      r.output.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string port_list(const std::vector<std::uint16_t>& ports) {
  std::string list;
  for (const auto p : ports) list += (list.empty() ? "" : ",") + std::to_string(p);
  return list;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// Redis: CLIENT LIST's `addr=IP:PORT` lines whose port is the holder's give their `id=`; each is
// ended with CLIENT KILL ID (a killed client's connection is closed by the server at once).
killed_connections kill_on_redis(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  std::vector<std::string> base = {"redis-cli", "--no-auth-warning", "-h", server.host, "-p",
                                   std::to_string(server.port_or(6379))};
  if (!u.user().empty()) base.insert(base.end(), {"--user", u.user()});
  std::vector<std::string> env;
  if (u.password()) env.push_back("REDISCLI_AUTH=" + *u.password());
  auto list = base;
  list.insert(list.end(), {"CLIENT", "LIST"});
  const auto clients = run_tool(list, env);
  if (clients.exit_code != 0 || clients.output.find("id=") == std::string::npos)
    return failed("redis-cli CLIENT LIST failed: " + first_line(clients.output));
  killed_connections k;
  for (const auto& line : lines_of(clients.output)) {
    const auto id_at = line.find("id="), addr_at = line.find(" addr=");
    if (id_at != 0 || addr_at == std::string::npos) continue;
    const auto addr_end = line.find(' ', addr_at + 1);
    const auto addr = line.substr(addr_at + 6, addr_end - addr_at - 6);
    const auto colon = addr.rfind(':');
    if (colon == std::string::npos) continue;
    const auto port = static_cast<std::uint16_t>(std::stoul(addr.substr(colon + 1)));
    if (std::ranges::find(ports, port) == ports.end()) continue;
    auto kill = base;
    kill.insert(kill.end(), {"CLIENT", "KILL", "ID", line.substr(3, line.find(' ') - 3)});
    if (!k.issued_at) k.issued_at = shared_clock::now();
    const auto killed = run_tool(kill, env);
    if (killed.exit_code == 0 && killed.output.starts_with("1")) ++k.count;
  }
  if (k.count == 0) k.not_injected = "no Redis client at ports " + port_list(ports);
  return k;
}

// PostgreSQL: pg_terminate_backend of the backends whose pg_stat_activity.client_port is the
// holder's, as the URI's own role (a role may terminate its own sessions).
killed_connections kill_on_postgres(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  const auto database = u.path().empty() ? std::string("postgres") : u.path().substr(1);
  std::vector<std::string> env = {"PGCONNECT_TIMEOUT=10"};
  if (u.password()) env.push_back("PGPASSWORD=" + *u.password());
  const auto sql = "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity where client_port in (" +
                   port_list(ports) + ") and pid <> pg_backend_pid()";
  const auto issued_at = shared_clock::now();
  const auto r = run_tool({"psql", "-X", "-A", "-t", "-q", "-h", server.host, "-p", std::to_string(server.port_or(5432)),
                           "-U", u.user(), "-d", database, "-c", sql},
                          env);
  if (r.exit_code != 0) return failed("psql pg_terminate_backend failed: " + first_line(r.output));
  killed_connections k;
  k.count = std::stoul("0" + first_line(r.output));
  k.issued_at = issued_at;
  if (k.count == 0) k.not_injected = "no PostgreSQL backend at client ports " + port_list(ports);
  return k;
}

// MariaDB: KILL (the connection, not only its query) of the threads whose
// information_schema.PROCESSLIST.HOST ends with the holder's port, as the URI's own user.
killed_connections kill_on_mariadb(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  std::vector<std::string> base = {"mariadb", "--protocol=tcp", "-h", server.host, "-P",
                                   std::to_string(server.port_or(3306)), "-u", u.user(), "-N", "-B",
                                   "--connect-timeout=10"};
  std::vector<std::string> env;
  if (u.password()) env.push_back("MYSQL_PWD=" + *u.password());
  auto list = base;
  list.insert(list.end(), {"-e", "select ID from information_schema.PROCESSLIST where SUBSTRING_INDEX(HOST, ':', -1) in (" +
                                     port_list(ports) + ") and ID <> CONNECTION_ID()"});
  const auto ids = run_tool(list, env);
  if (ids.exit_code != 0) return failed("mariadb PROCESSLIST failed: " + first_line(ids.output));
  killed_connections k;
  for (const auto& id : lines_of(ids.output)) {
    auto kill = base;
    kill.insert(kill.end(), {"-e", "KILL CONNECTION " + id});
    if (!k.issued_at) k.issued_at = shared_clock::now();
    if (run_tool(kill, env).exit_code == 0) ++k.count;
  }
  if (k.count == 0) k.not_injected = "no MariaDB connection at client ports " + port_list(ports);
  return k;
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
  const auto family = family_of(scheme);
  if (family == "redis" || family == "postgres" || family == "mysql") return {};
  if (family == "zookeeper") return {};  // its session expired through session_blackhole.hpp's proxy
  if (family == "memcached") return "a memcached lock is an item with an expiry, not tied to a connection";
  if (family == "redlock") return "several masters: losing some of them is another fault";
  return "no server connection to kill";
}

std::uint16_t server_port_of(const std::string& uri) {
  const auto u = dlock::uri::parse(uri);
  const auto family = family_of(u.scheme());
  const std::uint16_t fallback = family == "redis" ? 6379 : family == "postgres" ? 5432
                                                        : family == "mysql"      ? 3306
                                                        : family == "memcached"  ? 11211
                                                        : family == "zookeeper"  ? 2181
                                                                                 : 0;
  return u.hosts().empty() ? fallback : u.hosts().front().port_or(fallback);
}

killed_connections kill_connections_on_server(const std::string& uri, const std::vector<std::uint16_t>& client_ports) {
  if (client_ports.empty()) return failed("the holder has no connection to the server");
  const auto u = dlock::uri::parse(uri);
  if (u.hosts().empty()) return failed("the URI names no server");
  const auto family = family_of(u.scheme());
  try {
    if (family == "redis") return kill_on_redis(u, client_ports);
    if (family == "postgres") return kill_on_postgres(u, client_ports);
    if (family == "mysql") return kill_on_mariadb(u, client_ports);
  } catch (const std::exception& e) {  // a number the tool printed that is not one
    return failed(std::string("unexpected answer from the server's tool: ") + e.what());
  }
  return failed(connection_kill_not_applicable(u.scheme()));
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
