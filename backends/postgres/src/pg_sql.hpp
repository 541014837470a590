#pragma once
// PostgreSQL's SQL text for the three shared table strategies (the contracts are in
// dlock_sql/dialect.hpp). Only the validated table and schema identifiers are spliced in, quoted.
#include <string>

#include "dlock_sql/dialect.hpp"

namespace dlock::pg {

// "schema"."table" (or "table"): both parts passed sql::is_identifier, so quoting is exact.
std::string qualified(const sql::table_ref& t, const std::string& suffix = "");
// The NOTIFY channel for a table: "dlock_" + table (an identifier; LISTEN quotes it).
std::string channel_for(const sql::table_ref& t);

// fair: the release NOTIFYs every time (fair waiters leave no mark on the lock row).
sql::index_sql index_statements(const sql::table_ref& t, bool fair = false);
sql::forupdate_sql forupdate_statements(const sql::table_ref& t);
sql::version_sql version_statements(const sql::table_ref& t);

// The longest name the table strategies take (bytea primary key; the B-tree limit is ~2700 bytes).
inline constexpr std::size_t max_name_length = 1024;

}  // namespace dlock::pg
