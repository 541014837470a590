// Fuzzes dlock::uri::parse, which reads configuration text a service may take from anywhere.
// Properties: it accepts or throws dlock::error (nothing else, no crash); an accepted URI has a
// lower-case scheme, a path that is empty or starts with '/', no NUL byte in any component, and
// no query key twice; redacted(), the only form dlock logs, does not change when only the secrets
// change (the password, and the value of every key naming a credential); the typed getters on every
// key throw only dlock::error too.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "dlock_fuzz/check.hpp"

namespace {

using dlock::fuzz::check;

bool names_a_credential(std::string_view key) {
  std::string lower;
  for (const unsigned char c : key) lower += static_cast<char>(std::tolower(c));
  for (const char* word : {"password", "secret", "token", "digest"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

// Every byte outside RFC 3986's unreserved set as %HH: the text parses back to the same bytes,
// whatever they are.
std::string encoded(std::string_view s, std::string_view also_kept = {}) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        also_kept.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      static constexpr char hex[] = "0123456789ABCDEF";
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

// The URI written back as text, its secrets replaced by `stand_in` when one is given.
std::string written(const dlock::uri& u, const std::optional<std::string>& stand_in) {
  std::string text = u.scheme() + "://";
  if (!u.user().empty() || u.password()) {
    text += encoded(u.user());
    if (u.password()) text += ":" + encoded(stand_in.value_or(*u.password()));
    text += "@";
  }
  for (std::size_t i = 0; i < u.hosts().size(); ++i) text += (i ? "," : "") + u.hosts()[i].to_string();
  text += encoded(u.path(), "/");
  for (std::size_t i = 0; i < u.query().size(); ++i) {
    const auto& [key, value] = u.query()[i];
    const bool hidden = stand_in && names_a_credential(key);
    text += (i ? "&" : "?") + encoded(key) + "=" + encoded(hidden ? *stand_in : value);
  }
  return text;
}

// redacted() is a function of what is not secret: two URIs that differ only in their secrets
// redact to the same text. Unlike looking for the secret in the output, this holds whatever the
// secret is: a short one, or one that also occurs, as typed, in the user, a host or the query.
void check_secrets_not_shown(const dlock::uri& u) {
  std::optional<dlock::uri> as_typed, stand_ins;
  try {
    as_typed = dlock::uri::parse(written(u, std::nullopt));
    stand_ins = dlock::uri::parse(written(u, std::string("stand-in")));
  } catch (const dlock::error&) {
    return;  // a host that does not survive being written back: the property needs both texts
  }
  check(as_typed->redacted() == stand_ins->redacted(), "redacted() does not depend on the secrets",
        as_typed->redacted(), stand_ins->redacted());
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

  check_secrets_not_shown(u);
  for (const auto& [key, value] : q) read_typed(u, key);
  return 0;
}
