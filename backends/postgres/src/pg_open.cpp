#include "pg_open.hpp"

#include "pg_notifier.hpp"
#include "pg_sql.hpp"

namespace dlock::pg {

std::vector<std::string> table_scheme_parameters() {
  auto keys = sql::common_parameter_names();
  for (const auto& k : connection_parameters()) keys.push_back(k);
  return keys;
}

std::vector<std::string> advisory_parameters() {
  auto keys = sql::pool_parameter_names();
  for (const char* k : {"sequence", "schema", "create_sequence"}) keys.emplace_back(k);
  for (const auto& k : connection_parameters()) keys.push_back(k);
  return keys;
}

sql::backend_setup table_setup(const uri& u, const lock_options& defaults, std::string_view default_table,
                               capabilities caps) {
  sql::backend_setup s;
  s.params = sql::parse_common_params(u, default_table);
  // Table schemes: without pool_size, keep every connection the pool opened (up to
  // max_connections) instead of 8. A connection is only opened when that many statements run at
  // once; with 8 kept, 32 threads closed and re-opened a server session on most checkouts (a
  // PostgreSQL fork each, 10-40 ms per cycle where raw libpq took 0.3 ms).
  if (!u.get("pool_size")) s.params.pool.max_idle = s.params.pool.max_connections;
  auto settings = pg_settings::from_uri(u);
  s.connections = sql::pool::make(make_connector(settings), s.params.pool);
  s.caps = caps;
  s.defaults = defaults;
  s.redacted_uri = u.redacted();
  s.max_name_length = max_name_length;
  {  // connect once now: wrong credentials, an unknown database, an unreachable server fail at open
    std::error_code ec;
    auto h = s.connections->checkout(ec);
    if (!h) throw error(ec, last_error_message());
  }
  s.notifier = std::make_shared<pg_notifier>(settings, s.params.pool.connect_timeout, channel_for(s.params.table));
  return s;
}

}  // namespace dlock::pg
