// What mysql+index, mysql+forupdate and mysql+version share: URI -> sql_common setup, capabilities.
#include "tables.hpp"

#include "connection.hpp"
#include "dialect.hpp"
#include "sql_connection.hpp"

namespace dlock::mysql {

std::vector<std::string> table_parameters() {
  auto keys = dlock::sql::common_parameter_names();
  keys.push_back("command_timeout");
  return keys;
}

dlock::sql::backend_setup setup_for(const uri& u, const lock_options& defaults, capabilities caps,
                                    std::string_view default_table) {
  dlock::sql::backend_setup s;
  s.params = dlock::sql::parse_common_params(u, default_table);
  auto settings = connection_settings::from_uri(u);
  settings.connect_timeout = s.params.pool.connect_timeout;
  s.connections = dlock::sql::pool::make(
      [settings](std::chrono::milliseconds connect_timeout, std::error_code& ec) {
        auto each = settings;
        each.connect_timeout = std::max(connect_timeout, std::chrono::milliseconds{1000});
        return open_sql_connection(each, ec);
      },
      s.params.pool);
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

// Not fair (no waiters table on MySQL yet), not blocking (MySQL cannot notify: waiters poll with
// the core's jittered backoff). Reentrant through owner + hold_count. lost_notification through
// the watchdog's failed renewals.
capabilities index_caps() noexcept {
  return {capability::reentrant, capability::expiring, capability::renewable, capability::fencing,
          capability::lost_notification};
}
// The row lock is held by a transaction on a dedicated connection: the server queues waiters
// (innodb_lock_wait_timeout), frees it when the connection dies (the session monitor notices and
// fires lost). No ttl, so nothing to renew.
capabilities forupdate_caps() noexcept {
  return {capability::blocking, capability::expiring, capability::fencing, capability::lost_notification};
}
capabilities version_caps() noexcept {
  return {capability::expiring, capability::renewable, capability::fencing, capability::lost_notification};
}

}  // namespace dlock::mysql

