#include <cstdlib>
#include <stdexcept>

#include "dlock_test/support.hpp"

namespace dlock::testing {

std::string server_uri(std::string_view variable) {
  const std::string name(variable);
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0')
    throw std::runtime_error(name + " is not set, and this test needs that server: run the tests under the launcher, "
                                    "compose/native/dlock-servers run -- ctest --test-dir build, or export its "
                                    "variables with eval \"$(compose/native/dlock-servers up)\"; to leave these "
                                    "tests out, say so with ctest -E");
  return value;
}

std::string with_scheme(std::string_view uri, std::string_view scheme) {
  const auto end = uri.find("://");
  if (end == std::string_view::npos) throw std::invalid_argument("not a URI (no \"://\"): " + std::string(uri));
  return std::string(scheme) + std::string(uri.substr(end));
}

}  // namespace dlock::testing
