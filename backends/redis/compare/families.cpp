// What dlock compare's server faults need of the Redis servers (core/compare_spi: family.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/server_tools.hpp"

namespace dlock::compare_spi {

namespace {

constexpr std::uint16_t default_port = 6379;

// Redis: CLIENT LIST's `addr=IP:PORT` lines whose port is the holder's give their `id=`; each is
// ended with CLIENT KILL ID (a killed client's connection is closed by the server at once).
killed_connections kill_on_redis(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  std::vector<std::string> base = {
      "redis-cli", "--no-auth-warning", "-h", server.host, "-p", std::to_string(server.port_or(default_port))};
  if (!u.user().empty()) base.insert(base.end(), {"--user", u.user()});
  std::vector<std::string> env;
  if (u.password()) env.push_back("REDISCLI_AUTH=" + *u.password());
  auto list = base;
  list.insert(list.end(), {"CLIENT", "LIST"});
  const auto clients = run_tool(list, env);
  if (clients.exit_code != 0 || clients.output.find("id=") == std::string::npos)
    return no_kill("redis-cli CLIENT LIST failed: " + first_line(clients.output));
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

constexpr family families[] = {
    {.prefix = "redis",
     .variable = "DLOCK_REDIS_URI",
     .launcher_process = "redis",
     .kill = connection_kill::server_command,
     .kill_connections = kill_on_redis,
     .kill_described = "Redis CLIENT KILL with redis-cli",
     .default_port = default_port},
    // A Sentinel set: the master moves, so no one process is "the server" to restart or pause, and
    // the holder's connections are to whichever master the sentinels name (the failovers are
    // redis/RedisSentinel.*'s business, on the set itself).
    {.prefix = "redis",
     .suffix = "+sentinel",
     .variable = "DLOCK_REDIS_SENTINEL_URI",
     .connection_kill_not_applicable = "a Sentinel set: the connections go to whichever master the sentinels name",
     .partition_not_applicable = "a Sentinel set: the sentinels name the master by its 127.0.0.1 address, which the "
                                 "partition's namespaces do not forward",
     .default_port = 26379},
    // A Redis Cluster: each name lives on the master of its slot, so no one process is "the server"
    // (the failovers and slot migrations are redis/RedisCluster.*'s business, on the cluster itself).
    {.prefix = "redis",
     .suffix = "+cluster",
     .variable = "DLOCK_REDIS_CLUSTER_URI",
     .connection_kill_not_applicable = "a Redis Cluster: the connections go to the master of each name's slot",
     .partition_not_applicable = "a Redis Cluster: its nodes announce their 127.0.0.1 addresses, which the "
                                 "partition's namespaces do not forward",
     .default_port = default_port},
    // Several masters: losing some of them is the quorum faults' business, not one server's.
    {.prefix = "redlock",
     .variable = "DLOCK_REDLOCK_URI",
     .connection_kill_not_applicable = "several masters: losing some of them is another fault",
     .quorum = quorum_kind::independent_masters,
     .quorum_variable = "DLOCK_REDLOCK_URI",
     .quorum_server = "redlock",
     .default_port = default_port},
};

}  // namespace

std::span<const family> families_redis() noexcept { return families; }

}  // namespace dlock::compare_spi
