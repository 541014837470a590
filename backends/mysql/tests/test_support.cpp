#include "test_support.hpp"

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "dlock/uri.hpp"
#include "dlock_test/support.hpp"

namespace dlock::mysql::test {

std::string server_uri() { return dlock::testing::server_uri("DLOCK_MYSQL_URI"); }

std::string uri_for(std::string_view scheme, std::string_view query) {
  return dlock::testing::with_query(dlock::testing::with_scheme(server_uri(), scheme), query);
}

std::string unique_table(std::string_view prefix) {
  auto n = unique_name(prefix);
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

std::vector<std::string> names_around(const std::string& base) {
  return {base + "'; DROP TABLE x; --",
          base + "\\",
          base + "%",
          base + "_",
          base + std::string("\0a", 2),
          base + std::string("\0b", 2),
          base + "Case",
          base + "case",
          base + "CASE",
          base + " ",
          base};
}

std::shared_ptr<::sql::Connection> raw_connect(const std::string& uri_text) {
  static std::mutex init;
  ::sql::mysql::MySQL_Driver* d;
  {
    std::lock_guard lock(init);
    d = ::sql::mysql::get_mysql_driver_instance();
  }
  const auto u = uri::parse(uri_text);
  ::sql::ConnectOptionsMap o;
  o["hostName"] = ::sql::SQLString(u.hosts().at(0).host);
  o["port"] = static_cast<int>(u.hosts().at(0).port_or(3306));
  o["userName"] = ::sql::SQLString(u.user());
  o["password"] = ::sql::SQLString(u.password().value_or(""));
  o["schema"] = ::sql::SQLString(u.path().substr(1));
  o["OPT_CONNECT_TIMEOUT"] = 5;
  return std::shared_ptr<::sql::Connection>(d->connect(o));
}

std::optional<std::int64_t> query_int(::sql::Connection& c, const std::string& text, const std::string& param) {
  std::unique_ptr<::sql::PreparedStatement> st(c.prepareStatement(text));
  st->setString(1, param);
  std::unique_ptr<::sql::ResultSet> rs(st->executeQuery());
  if (!rs->next() || rs->isNull(1)) return std::nullopt;
  return rs->getInt64(1);
}

void kill_connection(::sql::Connection& c, std::int64_t id) {
  std::unique_ptr<::sql::Statement> st(c.createStatement());
  st->execute("KILL " + std::to_string(id));  // an integer, not a name
}

}  // namespace dlock::mysql::test
