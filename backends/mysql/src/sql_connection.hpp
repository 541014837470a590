#pragma once
// dlock::sql::connection (backends/sql_common) over Connector/C++: what the shared table
// strategies (index, FOR UPDATE, version) run their MariaDB statements through.
#include <memory>

#include "connection.hpp"
#include "dlock_sql/connection.hpp"

namespace dlock::mysql {

// Opens one connection for the sql_common pool; nullptr with ec set on failure. Never throws.
std::unique_ptr<dlock::sql::connection> open_sql_connection(const connection_settings& s,
                                                            std::error_code& ec) noexcept;

// The failure kind of a Connector/C++ exception, by MySQL/MariaDB error number and SQLSTATE.
dlock::sql::failure failure_of(const ::sql::SQLException& e) noexcept;

}  // namespace dlock::mysql
