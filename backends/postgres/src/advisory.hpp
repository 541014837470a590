#pragma once
// postgres+advisory: session-level advisory locks, key = dlock::spi::sha256_int64(name) (the
// first 8 bytes of SHA-256 of the name, big-endian, signed): 2^64 keys, any bytes in a name.
// A lease holds its own pooled connection (advisory locks stack per session, so two leases never
// share one), and a dead session is a lost lock.
#include <memory>

#include "dlock/spi.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::pg {

std::shared_ptr<backend> make_advisory_backend(std::shared_ptr<sql::pool> connections, capabilities caps,
                                               lock_options defaults, std::string redacted_uri);

}  // namespace dlock::pg
