#pragma once
// What each postgres+* scheme declares, in one place: register.cpp puts these in the registry and
// each backend reports the same value from capabilities().
#include "dlock/capabilities.hpp"

namespace dlock::pg {

// postgres+index: reentrant through owner + hold count; fair only with fair=true (the strategy
// adds it then); renewable (the row's expiry moves); lost_notification through failed renewals.
inline constexpr capabilities postgres_index_caps{capability::reentrant, capability::expiring, capability::renewable,
                                                  capability::fencing, capability::lost_notification};

// postgres+forupdate: the server queues waiters on the row lock and frees it with the session
// (the session monitor fires lost); no ttl on the server, nothing to renew.
inline constexpr capabilities postgres_forupdate_caps{capability::blocking, capability::expiring, capability::fencing,
                                                      capability::lost_notification};

// postgres+version: the version is the fencing token; renew moves the grant's expiry.
inline constexpr capabilities postgres_version_caps{capability::expiring, capability::renewable, capability::fencing,
                                                    capability::lost_notification};

// postgres+advisory: pg_advisory_lock queues waiters on the server; the lock is the session's
// (the session monitor fires lost); fencing from a sequence read in the granting statement.
inline constexpr capabilities postgres_advisory_caps{capability::blocking, capability::expiring, capability::fencing,
                                                     capability::lost_notification};

}  // namespace dlock::pg
