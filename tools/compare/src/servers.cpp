#include "dlock_compare/servers.hpp"

#include <cstdlib>

#include "dlock_compare/families.hpp"

namespace dlock::compare {

const char* server_variable(std::string_view scheme) {
  const auto* family = family_of_scheme(scheme);
  return family != nullptr ? family->variable : nullptr;
}

const char* launcher_process(std::string_view scheme) {
  const auto* family = family_of_scheme(scheme);
  return family != nullptr ? family->launcher_process : nullptr;
}

const family* family_of_scheme(std::string_view scheme) noexcept {
  const auto prefix = scheme.substr(0, scheme.find('+'));
  for (const auto* family : families())
    if (family->prefix == prefix && !family->suffix.empty() && scheme.ends_with(family->suffix)) return family;
  for (const auto* family : families())
    if (family->prefix == prefix && family->suffix.empty()) return family;
  return nullptr;
}

std::vector<const family*> families_of_quorum(quorum_kind kind) {
  std::vector<const family*> found;
  for (const auto* family : families())
    if (family->quorum == kind) found.push_back(family);
  return found;
}

std::optional<std::string> local_uri_for(std::string_view scheme, const std::filesystem::path& dir) {
  const auto* family = family_of_scheme(scheme);
  if (family == nullptr || family->local_uri == nullptr) return std::nullopt;
  std::string uri = family->local_uri;
  if (const auto at = uri.find("{dir}"); at != std::string::npos) uri.replace(at, 5, dir.string());
  return uri;
}

server_uri server_uri_for(std::string_view scheme, const char* variable) {
  if (variable == nullptr) variable = server_variable(scheme);
  if (variable == nullptr) return {std::nullopt, "no server variable known for this scheme"};
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return {std::nullopt, std::string(variable) + " unset"};
  const std::string server = value;
  const auto colon = server.find("://");
  if (colon == std::string::npos) return {std::nullopt, std::string(variable) + " is not a URI"};
  return {std::string(scheme) + server.substr(colon), {}};  // the server's URI with the backend's scheme
}

}  // namespace dlock::compare
