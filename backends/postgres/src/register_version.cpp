// postgres+version://user:password@host:port/database?table=dlock_version&schema=&create_table=true&...
#include "dlock/spi.hpp"
#include "pg_open.hpp"
#include "pg_sql.hpp"

namespace dlock {

void register_postgres_version(registry& r) {
  static constexpr capabilities caps{capability::expiring, capability::renewable, capability::fencing, capability::lost_notification};
  r.add({.scheme = "postgres+version",
         .caps = caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+version://dlock:secret@127.0.0.1:5432/dlock?table=dlock_version",
         .summary = "optimistic version: UPDATE ... WHERE version = read version AND free-or-expired; the version is the fencing token",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_version", caps);
           auto statements = pg::version_statements(setup.params.table);
           return sql::make_version_backend(std::move(setup), std::move(statements));
         }});
}

}  // namespace dlock
