// Common SQL URI parameters; the table and schema names are the only user text that ever
// reaches SQL, and only after is_identifier() accepted them.
#include "dlock_sql/params.hpp"

#include "dlock/error.hpp"

namespace dlock::sql {

bool is_identifier(std::string_view s) noexcept {
  if (s.empty() || s.size() > 63) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(s.front())) return false;
  for (char c : s)
    if (!alpha(c) && !digit(c)) return false;
  return true;
}

const std::vector<std::string>& pool_parameter_names() {
  static const std::vector<std::string> names{"pool_size", "max_connections", "max_dedicated", "connect_timeout",
                                              "checkout_timeout"};
  return names;
}

pool_options parse_pool_options(const uri& u) {
  pool_options p;
  if (auto v = u.get_int("pool_size", 0, 1024)) p.max_idle = static_cast<std::size_t>(*v);
  if (auto v = u.get_int("max_connections", 1, 4096)) p.max_connections = static_cast<std::size_t>(*v);
  if (auto v = u.get_int("max_dedicated", 0, 4096)) p.max_dedicated = static_cast<std::size_t>(*v);
  if (auto v = u.get_duration("connect_timeout")) p.connect_timeout = *v;
  if (auto v = u.get_duration("checkout_timeout")) p.checkout_timeout = *v;
  if (p.connect_timeout.count() <= 0)
    throw error(errc::invalid_uri, "connect_timeout must be positive in " + u.redacted());
  if (p.max_dedicated >= p.max_connections && p.max_connections > 1)
    p.max_dedicated = p.max_connections - 1;  // always leave one for short statements
  return p;
}

const std::vector<std::string>& common_parameter_names() {
  static const std::vector<std::string> names{"table",         "schema",          "create_table",
                                              "fair",          "pool_size",       "max_connections",
                                              "max_dedicated", "connect_timeout", "checkout_timeout"};
  return names;
}

namespace {
std::string identifier_param(const uri& u, std::string_view key, std::string fallback, std::size_t max_length) {
  auto v = u.get(key);
  if (!v) return fallback;
  if (!is_identifier(*v) || v->size() > max_length)
    throw error(errc::invalid_uri, std::string(key) + "=" + *v +
                                       ": expected an SQL identifier matching [A-Za-z_][A-Za-z0-9_]{0," +
                                       std::to_string(max_length - 1) + "} in " + u.redacted());
  return *v;
}
}  // namespace

common_params parse_common_params(const uri& u, std::string_view default_table) {
  common_params p;
  p.table.table = identifier_param(u, "table", std::string(default_table), max_table_length);
  p.table.schema = identifier_param(u, "schema", "", 63);
  if (auto v = u.get_bool("create_table")) p.create_table = *v;
  if (auto v = u.get_bool("fair")) p.fair = *v;
  p.pool = parse_pool_options(u);
  return p;
}

}  // namespace dlock::sql
