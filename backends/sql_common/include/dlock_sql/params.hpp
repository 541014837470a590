#pragma once
// The URI parameters every SQL scheme shares, and the only text ever put into SQL besides the
// dialect's fixed statements: the schema and table names, validated as plain identifiers
// (^[A-Za-z_][A-Za-z0-9_]{0,62}$) and then quoted by the dialect. Lock names are never SQL text.
#include <string>
#include <string_view>
#include <vector>

#include "dlock/uri.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::sql {

// A schema-qualified table name whose parts passed is_identifier().
struct table_ref {
  std::string schema;  // empty: the connection's default (PG search_path, MySQL current database)
  std::string table;
};

struct common_params {
  table_ref table;
  bool create_table = true;  // create the table(s) on first use if absent (CREATE ... IF NOT EXISTS)
  bool fair = false;         // index strategy: grant in arrival order through a waiters table
  pool_options pool;
};

// true for ^[A-Za-z_][A-Za-z0-9_]{0,62}$ (63 bytes: PostgreSQL's NAMEDATALEN-1, within MySQL's 64).
bool is_identifier(std::string_view s) noexcept;

// The strategies name their other objects after the table: <table>_fence, <table>_waiters, and
// PostgreSQL's NOTIFY channel dlock_<table>. PostgreSQL silently cuts a longer identifier to 63
// bytes, so a 63-byte table name made "<table>_fence" the table's own name (CREATE TABLE IF NOT
// EXISTS then skipped the table); a table name leaves room for the longest suffix.
inline constexpr std::string_view longest_table_suffix = "_waiters";
inline constexpr std::size_t max_table_length = 63 - longest_table_suffix.size();  // 55

// Query keys of the pool, which every SQL scheme has: pool_size, max_connections, max_dedicated,
// connect_timeout, checkout_timeout.
const std::vector<std::string>& pool_parameter_names();
// The pool keys above. max_dedicated is kept below max_connections (one is always left for short
// statements). Throws dlock::error(invalid_uri).
pool_options parse_pool_options(const uri& u);

// Query keys of the table schemes: table, schema, create_table, fair and the pool keys.
const std::vector<std::string>& common_parameter_names();

// Parses the keys above (table defaults to `default_table`). Throws dlock::error(invalid_uri)
// naming the key, the value and what is expected (e.g. "table=a-b: expected an SQL identifier
// matching [A-Za-z_][A-Za-z0-9_]{0,54}"; a schema may have up to 63 characters).
common_params parse_common_params(const uri& u, std::string_view default_table);

}  // namespace dlock::sql
