#pragma once
// A parsed backend URI: scheme://[user[:password]@]host[:port][,host[:port]...][/path][?key=value&...]
// RFC 3986 allows one host per authority, so a comma-separated host list is split off before the
// rest is parsed (core/src/uri.cpp, the only user of uriparser). Percent-escapes are decoded.
//
// The password is kept for the backend to use, and is never part of any message: redacted() is
// the only form of a URI that dlock ever logs or throws.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock {

struct host_port {
  std::string host;                   // "127.0.0.1", "localhost", "::1" (brackets removed)
  std::optional<std::uint16_t> port;  // nullopt when the URI gives none

  std::uint16_t port_or(std::uint16_t fallback) const noexcept { return port.value_or(fallback); }
  std::string to_string() const;  // "host:port", "[::1]:port"
};

class uri {
 public:
  // Throws dlock::error(errc::invalid_uri) naming what is wrong and what is expected.
  static uri parse(std::string_view text);

  // On a temporary (`uri::parse(t).hosts()`) each accessor returns a copy, not a reference into
  // the dying object: `for (auto& h : uri::parse(t).hosts())` would otherwise read freed memory.
  const std::string& scheme() const& noexcept { return scheme_; }  // lower case, e.g. "redis", "mysql+forupdate"
  std::string scheme() && { return std::move(scheme_); }
  const std::string& user() const& noexcept { return user_; }
  std::string user() && { return std::move(user_); }
  const std::optional<std::string>& password() const& noexcept { return password_; }
  std::optional<std::string> password() && { return std::move(password_); }
  const std::vector<host_port>& hosts() const& noexcept { return hosts_; }
  std::vector<host_port> hosts() && { return std::move(hosts_); }
  const std::string& path() const& noexcept { return path_; }  // decoded; "" or starts with '/'
  std::string path() && { return std::move(path_); }
  const std::vector<std::pair<std::string, std::string>>& query() const& noexcept { return query_; }
  std::vector<std::pair<std::string, std::string>> query() && { return std::move(query_); }

  // The URI with the password replaced by "***". The only form ever logged or put in a message.
  std::string redacted() const;

  // Query parameters. A key given twice is an error at parse time.
  bool has(std::string_view key) const noexcept;
  std::optional<std::string> get(std::string_view key) const;
  // Typed getters: a bad value throws errc::invalid_uri naming the key, the value and what is expected.
  std::optional<std::chrono::milliseconds> get_duration(std::string_view key) const;
  std::optional<std::int64_t> get_int(std::string_view key, std::int64_t min, std::int64_t max) const;
  std::optional<bool> get_bool(std::string_view key) const;  // true/false, yes/no, on/off, 1/0

  // Throws errc::invalid_uri if a query key is in neither list, naming it and listing the accepted ones.
  void require_known_keys(const std::vector<std::string>& accepted) const;

 private:
  std::string scheme_, user_;
  std::optional<std::string> password_;
  std::vector<host_port> hosts_;
  std::string path_;
  std::vector<std::pair<std::string, std::string>> query_;
};

// The longest duration dlock accepts anywhere (ttl, renew, poll, waits given as text): 10 years.
// Deadlines are computed on std::chrono::steady_clock in nanoseconds, which overflows about 292
// years after boot, and servers keep expiries in milliseconds; 10 years is far inside both and far
// beyond any sensible lease.
inline constexpr std::chrono::hours longest_duration{24 * 365 * 10};

// "500ms", "30s", "2m", "1h", "1.5s", at most longest_duration. Throws errc::invalid_argument
// saying what is expected (and the limit, for a duration too long).
std::chrono::milliseconds parse_duration(std::string_view text);
// "1500ms", "30s", "2m": the shortest exact form.
std::string format_duration(std::chrono::milliseconds d);

// Best effort for text that did not parse: hides whatever sits between "user:" and "@".
std::string redact_uri_text(std::string_view text);

}  // namespace dlock
