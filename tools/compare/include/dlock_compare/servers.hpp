#pragma once
// Where a scheme's server comes from: the variables compose/native/dlock-servers prints, and its
// process names for stop/start, as its backend declared them (families.hpp). One copy, for
// `dlock compare` and the scenario tests.
#include <optional>
#include <string>
#include <string_view>

namespace dlock::compare {

// The variable that names the server of a scheme's family ("x+fair" -> DLOCK_X_URI), or nullptr
// for a scheme with no server or none known.
const char* server_variable(std::string_view scheme);

// The launcher's process name for a scheme's server (`dlock-servers stop NAME`), for server-restart;
// nullptr when there is no single server process to restart (no server, or several).
const char* launcher_process(std::string_view scheme);

// The server's URI for `scheme`: the variable's value with its scheme replaced by `scheme`
// (DLOCK_X_URI x://... -> x+strategy://...), or why there is none.
struct server_uri {
  std::optional<std::string> uri;
  std::string not_run_because;  // "DLOCK_X_URI unset", ...
};
// `variable` overrides the family's (the ensemble faults run on its quorum_variable).
server_uri server_uri_for(std::string_view scheme, const char* variable = nullptr);

}  // namespace dlock::compare
