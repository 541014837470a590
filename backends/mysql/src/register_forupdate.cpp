// mysql+forupdate://: a table strategy of backends/sql_common with MariaDB's SQL (dialect.cpp).
#include "dialect.hpp"
#include "dlock_sql/strategies.hpp"
#include "tables.hpp"

namespace dlock {

void register_mysql_forupdate(registry& r) {
  r.add({.scheme = "mysql+forupdate",
         .caps = mysql::forupdate_caps(),
         .scope = lock_scope::network,
         .example_uri = "mysql+forupdate://user:password@127.0.0.1:3306/dlock?table=dlock_forupdate",
         .summary = "SELECT .. FOR UPDATE in a transaction on a dedicated connection; NOWAIT / lock wait timeout",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::forupdate_caps(), "dlock_forupdate");
           if (setup.params.table.table.size() > 58)
             throw error(errc::invalid_uri, u.redacted() + ": table names are limited to 58 characters on "
                                                           "mysql+forupdate (the fence sequence is <table>_fence)");
           auto sql = mysql::forupdate_dialect(setup.params.table);
           return dlock::sql::make_forupdate_backend(std::move(setup), std::move(sql));
         }});
}

}  // namespace dlock
