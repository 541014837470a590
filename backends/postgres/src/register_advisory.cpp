// postgres+advisory://user:password@host:port/database?max_dedicated=32&connect_timeout=5s&sequence=dlock_advisory_fence
#include "advisory.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/params.hpp"
#include "pg_open.hpp"

namespace dlock {

void register_postgres_advisory(registry& r) {
  static constexpr capabilities caps{capability::blocking, capability::expiring, capability::fencing,
                                     capability::lost_notification};
  r.add({.scheme = "postgres+advisory",
         .caps = caps,
         .scope = lock_scope::network,
         .example_uri = "postgres+advisory://dlock:secret@127.0.0.1:5432/dlock",
         .summary = "session advisory lock pg_try_advisory_lock / pg_advisory_lock + lock_timeout, "
                    "key = first 8 bytes of SHA-256(name); one connection per lease; fencing token from a sequence read in the granting statement",
         .parameters = pg::advisory_parameters(),
         .open = [](const uri& u, const lock_options& defaults) -> std::shared_ptr<backend> {
           auto params = sql::parse_common_params(u, "unused");
           auto settings = pg::pg_settings::from_uri(u);
           auto pool = sql::pool::make(pg::make_connector(settings), params.pool);
           return pg::make_advisory_backend(std::move(pool), caps, defaults, u.redacted(),
                                            pg::advisory_sequence::from_uri(u));
         }});
}

}  // namespace dlock
