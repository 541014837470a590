// What mysql+index, mysql+forupdate and mysql+version share: URI -> sql_common setup.
#include "tables.hpp"

#include "connection.hpp"
#include "dialect.hpp"
#include "sql_connection.hpp"

namespace dlock::mysql {

std::vector<std::string> table_parameters() {
  auto keys = dlock::sql::common_parameter_names();
  keys.emplace_back("command_timeout");
  return keys;
}

dlock::sql::backend_setup setup_for(const uri& u, const lock_options& defaults, capabilities caps,
                                    std::string_view default_table) {
  dlock::sql::backend_setup s;
  s.params = dlock::sql::parse_common_params(u, default_table);
  s.connections = make_pool(connection_settings::from_uri(u), s.params.pool);
  s.caps = caps;
  s.defaults = defaults;
  s.redacted_uri = u.redacted();
  s.max_name_length = max_name_bytes;
  // Fail at open on wrong credentials, an unknown database, an unreachable server.
  std::error_code ec;
  auto h = s.connections->checkout(ec);
  if (!h) throw error(ec, last_error_message());
  return s;
}

}  // namespace dlock::mysql
