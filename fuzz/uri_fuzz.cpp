// Fuzzes dlock::uri::parse, which reads configuration text a service may take from anywhere.
// Properties: it accepts or throws dlock::error (nothing else, no crash); an accepted URI has a
// lower-case scheme, a path that is empty or starts with '/', no NUL byte in any component, and
// no query key twice; and the password (and every secret query value) never appears in redacted(), the only
// form dlock logs. The typed getters on every key throw only dlock::error too.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "dlock_fuzz/check.hpp"

namespace {

using dlock::fuzz::check;

// A secret we can look for in redacted(): long enough not to occur by chance in what is shown.
bool appears_elsewhere(const dlock::uri& u, const std::string& secret) {
  std::string shown = u.scheme() + "\n" + u.user() + "\n" + u.path();
  for (const auto& h : u.hosts()) shown += "\n" + h.to_string();
  for (const auto& [k, v] : u.query()) shown += "\n" + k + "\n" + v;
  // The shown parts also run together as redacted() joins them ("user@host", "key=value&key"): a
  // password typed again across a query key and its value is shown there, not leaked.
  shown += "\n" + u.user() + "@";
  for (const auto& h : u.hosts()) shown += h.to_string() + ",";
  shown += u.path() + "?";
  for (const auto& [k, v] : u.query()) shown += k + "=" + v + "&";
  return shown.find(secret) != std::string::npos;
}

void check_not_shown(const dlock::uri& u, const std::string& secret, const std::string& redacted) {
  if (secret.size() < 6 || appears_elsewhere(u, secret)) return;
  check(redacted.find(secret) == std::string::npos, "a secret appears in redacted()", secret, redacted);
}

void read_typed(const dlock::uri& u, const std::string& key) {
  try {
    (void)u.get_duration(key);
  } catch (const dlock::error&) {
  }
  try {
    (void)u.get_int(key, -1000, 1000);
  } catch (const dlock::error&) {
  }
  try {
    (void)u.get_bool(key);
  } catch (const dlock::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)dlock::redact_uri_text(text);
  dlock::uri u;
  try {
    u = dlock::uri::parse(text);
  } catch (const dlock::error&) {
    return 0;  // refused, with a message: fine
  }
  check(std::none_of(u.scheme().begin(), u.scheme().end(), [](unsigned char c) { return std::isupper(c); }),
        "the scheme is lower case", u.scheme());
  check(u.path().empty() || u.path().front() == '/', "the path is empty or starts with '/'", u.path());
  // No component holds a NUL byte: the C client libraries would cut the text there.
  const auto no_nul = [](const std::string& s) { return s.find('\0') == std::string::npos; };
  check(no_nul(u.user()) && no_nul(u.password().value_or("")) && no_nul(u.path()), "no NUL byte in a component", text);
  for (const auto& h : u.hosts()) check(no_nul(h.host), "no NUL byte in a host", text);
  for (const auto& [k, v] : u.query()) check(no_nul(k) && no_nul(v), "no NUL byte in the query", text);
  const auto& q = u.query();
  for (std::size_t i = 0; i < q.size(); ++i)
    for (std::size_t j = i + 1; j < q.size(); ++j) check(q[i].first != q[j].first, "no query key twice", q[i].first);

  const std::string redacted = u.redacted();
  if (u.password()) check_not_shown(u, *u.password(), redacted);
  for (const auto& [key, value] : q) {
    std::string lower;
    for (const unsigned char c : key) lower += static_cast<char>(std::tolower(c));
    const bool secret = lower.find("password") != std::string::npos || lower.find("secret") != std::string::npos ||
                        lower.find("token") != std::string::npos || lower.find("digest") != std::string::npos;
    if (secret) check_not_shown(u, value, redacted);
    read_typed(u, key);
  }
  return 0;
}
