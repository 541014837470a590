#pragma once
// postgres+advisory: session-level advisory locks, key = dlock::spi::sha256_int64(name) (the
// first 8 bytes of SHA-256 of the name, big-endian, signed): 2^64 keys, any bytes in a name.
// Leases share a few pooled sessions (a session holds any number of advisory locks; a local
// guard keeps one process from stacking a grant on a key it already holds), and a dead session is
// a lost lock for every lease on it. Fencing tokens come from a sequence, read in the statement
// that takes the lock. The reader-writer lock (shared / exclusive on the same key) and the
// semaphore (N two-int4 slots) are in advisory_primitives.hpp, the shared acquisition and lease
// in advisory_grant.hpp.
#include <memory>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "dlock_sql/dialect.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::pg {

// The fencing sequence: URI sequence= (default dlock_advisory_fence), schema=, create_sequence=.
struct advisory_sequence {
  std::string qualified_name;  // quoted, e.g. "locks"."dlock_advisory_fence"
  bool create = true;          // run create_ddl at open
  sql::ddl create_ddl;         // CREATE SCHEMA/SEQUENCE IF NOT EXISTS
  static advisory_sequence from_uri(const uri& u);
};

// Declares postgres_advisory_caps (capabilities.hpp).
std::shared_ptr<backend> make_advisory_backend(std::shared_ptr<sql::pool> connections, lock_options defaults,
                                               std::string redacted_uri, const advisory_sequence& sequence);

}  // namespace dlock::pg
