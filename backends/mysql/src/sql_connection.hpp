#pragma once
// dlock::sql::connection (backends/sql_common) over Connector/C++: what every mysql scheme runs
// its statements through (the shared table strategies and GET_LOCK), from one pool.
#include <memory>

#include "connection.hpp"
#include "dlock_sql/connection.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::mysql {

// The pool of every mysql scheme (sql_common's): connections opened with `s`, each at least 1 s
// to connect (the client library counts whole seconds).
std::shared_ptr<dlock::sql::pool> make_pool(const connection_settings& s, const dlock::sql::pool_options& options);

// Opens one connection for the sql_common pool; nullptr with ec set on failure. Never throws.
std::unique_ptr<dlock::sql::connection> open_sql_connection(const connection_settings& s, std::error_code& ec) noexcept;

// The failure kind of a Connector/C++ exception, by MySQL/MariaDB error number and SQLSTATE.
dlock::sql::failure failure_of(const ::sql::SQLException& e) noexcept;

}  // namespace dlock::mysql
