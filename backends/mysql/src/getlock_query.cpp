#include "getlock_query.hpp"

#include <charconv>

namespace dlock::mysql {

namespace sql = dlock::sql;

std::optional<long long> scalar(const sql::result& out) {
  if (out.rows.empty() || out.rows.front().empty() || !out.rows.front().front()) return std::nullopt;
  const std::string& text = *out.rows.front().front();
  long long v = 0;
  const auto [end, e] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (e != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

bool query_scalar(sql::connection& c, const std::string& text, std::span<const sql::param> params,
                  std::optional<long long>& value, std::error_code& ec, const std::string& what) noexcept {
  sql::result out;
  sql::sql_error err;
  if (!c.execute(text, params, out, err)) {
    sql::set_sql_error(ec, err, what);
    return false;
  }
  value = scalar(out);
  return true;
}

}  // namespace dlock::mysql
