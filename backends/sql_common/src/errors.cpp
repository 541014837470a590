// Mapping of classified SQL failures to dlock::errc, and their messages.
#include <string>

#include "dlock/error.hpp"
#include "dlock_sql/connection.hpp"

namespace dlock::sql {

std::error_code to_error_code(failure f) noexcept {
  switch (f) {
    case failure::auth_failed: return make_error_code(errc::authentication_failed);
    case failure::connection_lost:
    case failure::unreachable: return make_error_code(errc::backend_unavailable);
    default: return make_error_code(errc::backend_error);
  }
}

void set_sql_error(std::error_code& ec, const sql_error& err, std::string_view what) noexcept {
  try {
    std::string message(what);
    message += ": ";
    if (!err.code.empty()) message += "(" + err.code + ") ";
    message += err.message;
    set_error(ec, to_error_code(err.kind), std::move(message));
  } catch (...) {
    ec = to_error_code(err.kind);
  }
}

}  // namespace dlock::sql
