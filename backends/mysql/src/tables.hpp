#pragma once
// What mysql+index, mysql+forupdate and mysql+version share: the URI parameters, the sql_common
// setup (pool of Connector/C++ connections, checked at open). Their capabilities: capabilities.hpp.
#include <string>
#include <string_view>
#include <vector>

#include "dlock/spi.hpp"
#include "dlock_sql/strategies.hpp"

namespace dlock::mysql {

std::vector<std::string> table_parameters();
// Throws dlock::error: invalid_uri, authentication_failed, backend_unavailable, backend_error.
dlock::sql::backend_setup setup_for(const uri& u, const lock_options& defaults, capabilities caps,
                                    std::string_view default_table);

}  // namespace dlock::mysql
