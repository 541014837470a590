// What dlock compare's server faults need of the MariaDB server (core/compare_spi: family.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/server_tools.hpp"

namespace dlock::compare_spi {

namespace {

constexpr std::uint16_t default_port = 3306;

// MariaDB: KILL (the connection, not only its query) of the threads whose
// information_schema.PROCESSLIST.HOST ends with the holder's port, as the URI's own user.
killed_connections kill_on_mariadb(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  std::vector<std::string> base = {"mariadb",
                                   "--protocol=tcp",
                                   "-h",
                                   server.host,
                                   "-P",
                                   std::to_string(server.port_or(default_port)),
                                   "-u",
                                   u.user(),
                                   "-N",
                                   "-B",
                                   "--connect-timeout=10"};
  std::vector<std::string> env;
  if (u.password()) env.push_back("MYSQL_PWD=" + *u.password());
  auto list = base;
  list.insert(list.end(),
              {"-e", "select ID from information_schema.PROCESSLIST where SUBSTRING_INDEX(HOST, ':', -1) in (" +
                         port_list(ports) + ") and ID <> CONNECTION_ID()"});
  const auto ids = run_tool(list, env);
  if (ids.exit_code != 0) return no_kill("mariadb PROCESSLIST failed: " + first_line(ids.output));
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

constexpr family families[] = {
    {.prefix = "mysql",
     .variable = "DLOCK_MYSQL_URI",
     .launcher_process = "mariadb",
     .kill = connection_kill::server_command,
     .kill_connections = kill_on_mariadb,
     .kill_described = "MariaDB KILL with mariadb",
     .default_port = default_port},
};

}  // namespace

std::span<const family> families_mysql() noexcept { return families; }

}  // namespace dlock::compare_spi
