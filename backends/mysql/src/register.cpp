// The four MariaDB/MySQL schemes: mysql+getlock (named locks, getlock.cpp) and the three table
// strategies of backends/sql_common with MariaDB's SQL (dialect.cpp). They share one connection
// layer and pool (tables.cpp: setup_for).
#include "capabilities.hpp"
#include "dialect.hpp"
#include "dlock_sql/strategies.hpp"
#include "getlock.hpp"
#include "tables.hpp"

namespace dlock {

void register_mysql(registry& r) {
  r.add({.scheme = "mysql+getlock",
         .caps = mysql::mysql_getlock_caps,
         .primitives = mysql::mysql_getlock_primitives,
         .scope = lock_scope::network,
         .example_uri = "mysql+getlock://user:password@127.0.0.1:3306/dlock?ttl=30s",
         .summary = "GET_LOCK/RELEASE_LOCK, leases sharing few sessions (try first, wait on a session of its own); "
                    "server-side waiting; fencing token from a sequence read in the granting statement; semaphores as "
                    "N GET_LOCK slots (no reader-writer lock: no shared mode)",
         .parameters = mysql::getlock_backend::parameters(),
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<mysql::getlock_backend>(u, d); }});

  r.add({.scheme = "mysql+index",
         .caps = mysql::mysql_index_caps,
         .primitives = mysql::mysql_index_primitives,
         .scope = lock_scope::network,
         .example_uri = "mysql+index://user:password@127.0.0.1:3306/dlock?ttl=30s&table=dlock_index",
         .summary = "unique key: INSERT .. ON DUPLICATE KEY UPDATE takes over expired rows; reentrant count; polling; "
                    "reader-writer locks (writer-preferred) and semaphores as holder rows under a FOR UPDATE anchor",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::mysql_index_caps, "dlock_index");
           setup.primitives = mysql::mysql_index_primitives;
           auto sql = mysql::index_dialect(setup.params.table);
           auto units = mysql::units_dialect(setup.params.table);
           return dlock::sql::make_index_backend(std::move(setup), std::move(sql), std::move(units));
         }});

  r.add({.scheme = "mysql+forupdate",
         .caps = mysql::mysql_forupdate_caps,
         .scope = lock_scope::network,
         .example_uri = "mysql+forupdate://user:password@127.0.0.1:3306/dlock?table=dlock_forupdate",
         .summary = "SELECT .. FOR UPDATE in a transaction on a dedicated connection; NOWAIT / lock wait timeout",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::mysql_forupdate_caps, "dlock_forupdate");
           auto sql = mysql::forupdate_dialect(setup.params.table);
           return dlock::sql::make_forupdate_backend(std::move(setup), std::move(sql));
         }});

  r.add({.scheme = "mysql+version",
         .caps = mysql::mysql_version_caps,
         .scope = lock_scope::network,
         .example_uri = "mysql+version://user:password@127.0.0.1:3306/dlock?ttl=30s&table=dlock_version",
         .summary = "optimistic version: UPDATE .. WHERE version = ? AND (free or expired); version = fence",
         .parameters = mysql::table_parameters(),
         .open = [](const uri& u, const lock_options& d) -> std::shared_ptr<backend> {
           auto setup = mysql::setup_for(u, d, mysql::mysql_version_caps, "dlock_version");
           auto sql = mysql::version_dialect(setup.params.table);
           return dlock::sql::make_version_backend(std::move(setup), std::move(sql));
         }});
}

}  // namespace dlock
