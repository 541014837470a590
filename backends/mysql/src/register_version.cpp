// mysql+version://: a table strategy of backends/sql_common with MariaDB's SQL (dialect.cpp).
#include "dialect.hpp"
#include "dlock_sql/strategies.hpp"
#include "tables.hpp"

namespace dlock {

void register_mysql_version(registry& r) {
  r.add({.scheme = "mysql+version",
         .caps = mysql::version_caps(),
         .scope = lock_scope::network,
         .example_uri = "mysql+version://user:password@127.0.0.1:3306/dlock?ttl=30s&table=dlock_version",
         .summary = "optimistic version: UPDATE .. WHERE version = ? AND (free or expired); version = fence",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::version_caps(), "dlock_version");
           auto sql = mysql::version_dialect(setup.params.table);
           return dlock::sql::make_version_backend(std::move(setup), std::move(sql));
         }});
}

}  // namespace dlock
