// postgres+forupdate://user:password@host:port/database?table=dlock_forupdate&schema=&create_table=true&...
#include "dlock/spi.hpp"
#include "pg_open.hpp"
#include "pg_sql.hpp"

namespace dlock {

void register_postgres_forupdate(registry& r) {
  static constexpr capabilities caps{capability::blocking, capability::expiring, capability::fencing, capability::lost_notification};
  r.add({.scheme = "postgres+forupdate",
         .caps = caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+forupdate://dlock:secret@127.0.0.1:5432/dlock?table=dlock_forupdate",
         .summary = "SELECT ... FOR UPDATE (NOWAIT / lock_timeout) in a transaction held on a dedicated connection; COMMIT releases; fencing token from a sequence (the table name + _fence)",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_forupdate", caps);
           auto statements = pg::forupdate_statements(setup.params.table);
           return sql::make_forupdate_backend(std::move(setup), std::move(statements));
         }});
}

}  // namespace dlock
