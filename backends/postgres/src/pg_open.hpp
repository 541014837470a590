#pragma once
// What the four postgres+* schemes share at open: the URI -> settings, pool and notifier.
#include <memory>
#include <string>
#include <vector>

#include "dlock_sql/params.hpp"
#include "dlock_sql/strategies.hpp"
#include "pg_connection.hpp"

namespace dlock::pg {

// Query keys accepted by the table schemes (common SQL keys + sslmode), and by advisory
// (pool/connect keys + sslmode; it has no table).
std::vector<std::string> table_scheme_parameters();
std::vector<std::string> advisory_parameters();

// Parses, builds the pool, the LISTEN/NOTIFY notifier, and connects once (so wrong credentials,
// an unknown database or an unreachable server fail at open with a clear, password-free message).
sql::backend_setup table_setup(const uri& u, const lock_options& defaults, std::string_view default_table,
                               capabilities caps);

}  // namespace dlock::pg
