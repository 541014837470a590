#pragma once
// For the mysql tests and hooks: the server URI from DLOCK_MYSQL_URI (a test FAILS when it is
// unset), URIs with our schemes, and a raw Connector/C++ connection that does
// not go through the code under test.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock_test/support.hpp"

namespace sql {
class Connection;
}

namespace dlock::mysql::test {

// DLOCK_MYSQL_URI, or throws std::runtime_error saying how to start a server (the support library's server_uri).
std::string server_uri();
// server_uri() with the scheme replaced (mysql+getlock) and `query` appended.
std::string uri_for(std::string_view scheme, std::string_view query = "");
using dlock::testing::unique_name;
using dlock::testing::with_scheme;
// A fresh table name, "<prefix>_<24 random hex digits>": a test on tables of its own (unique_name
// with '_' for '-', which a MariaDB name needs no quoting for).
std::string unique_table(std::string_view prefix);
// `base`, and `base` with what SQL built by pasting, LIKE patterns, C strings (NUL) and case- or
// pad-insensitive collations would confuse: names every strategy must keep apart. A test adds the
// names its own key mapping has to keep apart too.
std::vector<std::string> names_around(const std::string& base);

// A raw connection to the URI's server (any scheme). Throws on failure.
std::shared_ptr<::sql::Connection> raw_connect(const std::string& uri_text);
// One integer from a query with one string parameter (nullopt for NULL).
std::optional<std::int64_t> query_int(::sql::Connection& c, const std::string& text, const std::string& param);
// KILL <id> (the MariaDB way an operator ends a session).
void kill_connection(::sql::Connection& c, std::int64_t id);

}  // namespace dlock::mysql::test
