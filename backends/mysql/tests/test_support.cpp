#include "test_support.hpp"

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>

#include "dlock/uri.hpp"

namespace dlock::mysql::test {

std::string server_uri() {
  const char* v = std::getenv("DLOCK_MYSQL_URI");
  if (!v || !*v)
    throw std::runtime_error(
        "DLOCK_MYSQL_URI is not set: start MariaDB with compose/native/dlock-servers up mariadb and "
        "eval its output (mysql://dlock:dlock-secret@127.0.0.1:13306/dlock)");
  return v;
}

std::string with_scheme(std::string_view uri_text, std::string_view scheme) {
  const auto pos = uri_text.find("://");
  if (pos == std::string_view::npos) throw std::runtime_error("not a URI");
  return std::string(scheme) + std::string(uri_text.substr(pos));
}

std::string uri_for(std::string_view scheme, std::string_view query) {
  std::string u = with_scheme(server_uri(), scheme);
  if (!query.empty()) u += (u.find('?') == std::string::npos ? "?" : "&") + std::string(query);
  return u;
}

std::string unique_name(std::string_view prefix) {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(m);
  static const char* hex = "0123456789abcdef";
  std::string s(prefix);
  s += '-';
  for (int i = 0; i < 20; ++i) s += hex[rng() % 16];
  return s;
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
