// postgres+index://user:password@host:port/database?table=dlock_index&schema=&create_table=true&...
#include "dlock/spi.hpp"
#include "pg_open.hpp"
#include "pg_sql.hpp"

namespace dlock {

void register_postgres_index(registry& r) {
  static constexpr capabilities caps{capability::reentrant, capability::expiring, capability::renewable, capability::fencing, capability::lost_notification};
  r.add({.scheme = "postgres+index",
         .caps = caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+index://dlock:secret@127.0.0.1:5432/dlock?table=dlock_index",
         .summary = "unique index: INSERT ... ON CONFLICT takes a free or expired row in one statement; DELETE of our row releases and NOTIFYs waiters",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_index", caps);
           auto statements = pg::index_statements(setup.params.table);
           return sql::make_index_backend(std::move(setup), std::move(statements));
         }});
}

}  // namespace dlock
