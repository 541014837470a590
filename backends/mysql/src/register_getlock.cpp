// mysql+getlock://user:password@host:3306/database: MariaDB/MySQL GET_LOCK named locks.
#include "connection.hpp"
#include "getlock.hpp"

namespace dlock {

void register_mysql_getlock(registry& r) {
  r.add({.scheme = "mysql+getlock",
         .caps = mysql::getlock_backend::declared_caps(),
         .scope = lock_scope::network,
         .example_uri = "mysql+getlock://user:password@127.0.0.1:3306/dlock?ttl=30s",
         .summary = "GET_LOCK/RELEASE_LOCK on a connection dedicated to the lease; server-side waiting; fencing token from a sequence read in the granting statement",
         .parameters = mysql::getlock_backend::parameters(),
         .open = [](const uri& u, const lock_options& d) { return std::make_shared<mysql::getlock_backend>(u, d); }});
}

}  // namespace dlock
