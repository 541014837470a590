#pragma once
// The raw side of the mysql benchmarks: Connector/C++ on a connection of its own, issuing the
// statements dlock issues, each prepared once.
#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/statement.h>

#include <map>
#include <memory>
#include <string>

#include "../tests/test_support.hpp"

namespace dlock::mysql::bench {

// One raw connection with one prepared statement per SQL text.
struct raw_session {
  std::shared_ptr<::sql::Connection> c = test::raw_connect(test::server_uri());
  std::map<std::string, std::unique_ptr<::sql::PreparedStatement>> st;
  ::sql::PreparedStatement& p(const std::string& text) {
    auto& s = st[text];
    if (!s) s.reset(c->prepareStatement(text));
    return *s;
  }
  // A statement without parameters, unprepared (START TRANSACTION, COMMIT).
  void exec(const std::string& text) { std::unique_ptr<::sql::Statement>(c->createStatement())->execute(text); }
};

}  // namespace dlock::mysql::bench
