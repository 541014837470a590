// What dlock compare's server faults need of the PostgreSQL server (core/compare_spi: family.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/server_tools.hpp"

namespace dlock::compare_spi {

namespace {

constexpr std::uint16_t default_port = 5432;

// PostgreSQL: pg_terminate_backend of the backends whose pg_stat_activity.client_port is the
// holder's, as the URI's own role (a role may terminate its own sessions).
killed_connections kill_on_postgres(const dlock::uri& u, const std::vector<std::uint16_t>& ports) {
  const auto& server = u.hosts().front();
  const auto database = u.path().empty() ? std::string("postgres") : u.path().substr(1);
  std::vector<std::string> env = {"PGCONNECT_TIMEOUT=10"};
  if (u.password()) env.push_back("PGPASSWORD=" + *u.password());
  const auto sql =
      "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity where client_port in (" +
      port_list(ports) + ") and pid <> pg_backend_pid()";
  const auto issued_at = shared_clock::now();
  const auto r = run_tool({"psql", "-X", "-A", "-t", "-q", "-h", server.host, "-p",
                           std::to_string(server.port_or(default_port)), "-U", u.user(), "-d", database, "-c", sql},
                          env);
  if (r.exit_code != 0) return no_kill("psql pg_terminate_backend failed: " + first_line(r.output));
  killed_connections k;
  k.count = std::stoul("0" + first_line(r.output));
  k.issued_at = issued_at;
  if (k.count == 0) k.not_injected = "no PostgreSQL backend at client ports " + port_list(ports);
  return k;
}

constexpr family families[] = {
    {.prefix = "postgres",
     .variable = "DLOCK_POSTGRES_URI",
     .launcher_process = "postgres",
     .kill = connection_kill::server_command,
     .kill_connections = kill_on_postgres,
     .kill_described = "PostgreSQL pg_terminate_backend with psql",
     .default_port = default_port},
};

}  // namespace

std::span<const family> families_postgres() noexcept { return families; }

}  // namespace dlock::compare_spi
