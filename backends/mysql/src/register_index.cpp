// mysql+index://: a table strategy of backends/sql_common with MariaDB's SQL (dialect.cpp).
#include "dialect.hpp"
#include "dlock_sql/strategies.hpp"
#include "tables.hpp"

namespace dlock {

void register_mysql_index(registry& r) {
  r.add({.scheme = "mysql+index",
         .caps = mysql::index_caps(),
         .scope = lock_scope::network,
         .example_uri = "mysql+index://user:password@127.0.0.1:3306/dlock?ttl=30s&table=dlock_index",
         .summary = "unique key: INSERT .. ON DUPLICATE KEY UPDATE takes over expired rows; reentrant count; polling",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::index_caps(), "dlock_index");
           if (setup.params.fair && setup.params.table.table.size() > 55)
             throw error(errc::invalid_uri, u.redacted() + ": with fair=true, table names are limited to 55 "
                                                           "characters on mysql+index (the waiters table is <table>_waiters)");
           if (setup.params.table.table.size() > 58)
             throw error(errc::invalid_uri, u.redacted() + ": table names are limited to 58 characters on "
                                                           "mysql+index (the fence sequence is <table>_fence)");
           auto sql = mysql::index_dialect(setup.params.table);
           return dlock::sql::make_index_backend(std::move(setup), std::move(sql));
         }});
}

}  // namespace dlock
