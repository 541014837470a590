#pragma once
// The schemes a test runs on without a server, found the way dlock compare finds them: the
// registry's scheme of a given scope whose family declares a local URI (family::local_uri).
#include <filesystem>
#include <stdexcept>
#include <string>

#include "dlock/registry.hpp"
#include "dlock_compare/families.hpp"

namespace dlock::compare::testing {

// The local URI, in `dir`, of the first registered scheme of `scope` that runs without a server.
// Throws std::runtime_error (gtest fails the test with the message) when the build has none.
inline std::string local_uri_of_scope(lock_scope scope, const std::filesystem::path& dir) {
  for (const auto& info : default_registry().list())
    if (info.scope == scope && info.unsafe_because.empty())
      if (auto uri = local_uri_for(info.scheme, dir)) return *uri;
  throw std::runtime_error(std::string("no registered scheme of ") + std::string(to_string(scope)) +
                           " scope declares a local URI (backends/<name>/compare/families.cpp)");
}

// `uri` with `parameters` ("k=v&k2=v2") appended to its query.
inline std::string with_parameters(const std::string& uri, const std::string& parameters) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + parameters;
}

}  // namespace dlock::compare::testing
