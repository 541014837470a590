#include <algorithm>
#include <cstdlib>

#include "dlock_test/support.hpp"

namespace dlock::testing {
namespace {

std::optional<std::string> scheme_of_uri(std::string_view uri) {
  const auto end = uri.find("://");
  if (end == std::string_view::npos || end == 0) return std::nullopt;
  std::string s(uri.substr(0, end));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string replace_scheme(const std::string& uri, const std::string& scheme) {
  const auto end = uri.find("://");
  if (scheme.empty() || end == std::string::npos) return uri;
  return scheme + uri.substr(end);
}

}  // namespace

std::vector<std::string> excluded_names_from_environment() {
  std::vector<std::string> out;
  const char* env = std::getenv("DLOCK_TEST_EXCLUDE");
  if (env == nullptr) return out;
  std::string item;
  for (const char* p = env;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      item += *p;
    }
  }
  return out;
}

std::optional<std::string> scheme_of(const conformance_target& t) {
  if (!t.scheme.empty()) return t.scheme;
  if (!t.uri.empty()) return scheme_of_uri(t.uri);
  if (const char* v = std::getenv(t.uri_env.c_str()); v != nullptr && *v != '\0') return scheme_of_uri(v);
  return std::nullopt;
}

bool is_excluded(const conformance_target& t, const std::vector<std::string>& excluded) {
  const auto scheme = scheme_of(t);
  return std::any_of(excluded.begin(), excluded.end(),
                     [&](const std::string& e) { return e == t.label || (scheme && e == *scheme); });
}

std::string with_query(std::string uri, std::string_view query) {
  if (query.empty()) return uri;
  uri += uri.find('?') == std::string::npos ? '?' : '&';
  uri += query;
  return uri;
}

resolved_uri resolve(const conformance_target& t) {
  if (!t.uri.empty()) return {replace_scheme(with_query(t.uri, t.query), t.scheme), {}};
  const char* v = std::getenv(t.uri_env.c_str());
  if (v == nullptr || *v == '\0')
    return {std::nullopt, t.uri_env +
                              " is not set: start the servers with compose/native/dlock-servers, or exclude "
                              "this backend with DLOCK_TEST_EXCLUDE=" +
                              t.label};
  return {replace_scheme(with_query(v, t.query), t.scheme), {}};
}

}  // namespace dlock::testing
