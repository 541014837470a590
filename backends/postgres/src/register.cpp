// The four PostgreSQL schemes: the three table strategies of backends/sql_common with
// PostgreSQL's SQL (pg_sql.cpp) and postgres+advisory (advisory.cpp). They share the libpq
// connection, the pool and the LISTEN/NOTIFY listener (pg_open.cpp).
#include "advisory.hpp"
#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/params.hpp"
#include "pg_open.hpp"
#include "pg_sql.hpp"

namespace dlock {

void register_postgres(registry& r) {
  r.add({.scheme = "postgres+index",
         .caps = pg::postgres_index_caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+index://dlock:secret@127.0.0.1:5432/dlock?table=dlock_index",
         .summary = "unique index: INSERT ... ON CONFLICT takes a free or expired row in one statement; DELETE of our "
                    "row releases and NOTIFYs waiters",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_index", pg::postgres_index_caps);
           auto statements = pg::index_statements(setup.params.table, setup.params.fair);
           return sql::make_index_backend(std::move(setup), std::move(statements));
         }});

  r.add({.scheme = "postgres+forupdate",
         .caps = pg::postgres_forupdate_caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+forupdate://dlock:secret@127.0.0.1:5432/dlock?table=dlock_forupdate",
         .summary = "SELECT ... FOR UPDATE (NOWAIT / lock_timeout) in a transaction held on a dedicated connection; "
                    "COMMIT releases; fencing token from a sequence (the table name + _fence)",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_forupdate", pg::postgres_forupdate_caps);
           auto statements = pg::forupdate_statements(setup.params.table);
           return sql::make_forupdate_backend(std::move(setup), std::move(statements));
         }});

  r.add({.scheme = "postgres+version",
         .caps = pg::postgres_version_caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+version://dlock:secret@127.0.0.1:5432/dlock?table=dlock_version",
         .summary = "optimistic version: UPDATE ... WHERE version = read version AND free-or-expired; the version is "
                    "the fencing token",
         .parameters = pg::table_scheme_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto setup = pg::table_setup(u, defaults, "dlock_version", pg::postgres_version_caps);
           auto statements = pg::version_statements(setup.params.table);
           return sql::make_version_backend(std::move(setup), std::move(statements));
         }});

  // postgres+advisory://user:password@host:port/database?max_dedicated=32&sequence=dlock_advisory_fence
  r.add({.scheme = "postgres+advisory",
         .caps = pg::postgres_advisory_caps,
         .primitives = pg::postgres_advisory_primitives,
         .scope = lock_scope::network,
         .example_uri = "postgres+advisory://dlock:secret@127.0.0.1:5432/dlock",
         .summary = "session advisory lock pg_try_advisory_lock / pg_advisory_lock + lock_timeout, "
                    "key = first 8 bytes of SHA-256(name); leases share few sessions (try first, wait on a session of "
                    "its own); fencing token from a sequence read in the granting statement; "
                    "rw locks as pg_advisory_lock_shared / pg_advisory_lock on the same key, semaphores as N two-int4 "
                    "advisory slots",
         .parameters = pg::advisory_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto settings = pg::pg_settings::from_uri(u);
           auto pool = sql::pool::make(pg::make_connector(settings), sql::parse_pool_options(u));
           return pg::make_advisory_backend(std::move(pool), defaults, u.redacted(),
                                            pg::advisory_sequence::from_uri(u));
         }});
}

}  // namespace dlock
