#include "dlock_compare/servers.hpp"

#include <cstdlib>

namespace dlock::compare {

namespace {

std::string_view family_of(std::string_view scheme) { return scheme.substr(0, scheme.find('+')); }

}  // namespace

const char* server_variable(std::string_view scheme) {
  const auto family = family_of(scheme);
  if (family == "redis") return "DLOCK_REDIS_URI";
  if (family == "redlock") return "DLOCK_REDLOCK_URI";
  if (family == "memcached") return "DLOCK_MEMCACHED_URI";
  if (family == "postgres") return "DLOCK_POSTGRES_URI";
  if (family == "mysql") return "DLOCK_MYSQL_URI";
  if (family == "zookeeper") return "DLOCK_ZOOKEEPER_URI";
  return nullptr;
}

const char* launcher_process(std::string_view scheme) {
  const auto family = family_of(scheme);
  if (family == "redis") return "redis";
  if (family == "memcached") return "memcached";
  if (family == "postgres") return "postgres";
  if (family == "mysql") return "mariadb";
  if (family == "zookeeper") return "zookeeper";
  return nullptr;  // memory, file: no server; redlock: several (losing some of them is another fault)
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
