// The only place that parses URIs (uriparser, RFC 3986). A comma-separated host list is split out
// of the authority first, because RFC 3986 allows a single host there.
#include "dlock/uri.hpp"

#include <uriparser/Uri.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>
#include <regex>

#include "dlock/error.hpp"

namespace dlock {
static std::string redact_userinfo(std::string_view text);  // internal; defined below
namespace {

std::string range_text(const UriTextRangeA& r) {
  if (r.first == nullptr || r.afterLast == nullptr) return {};
  return std::string(r.first, r.afterLast);
}

std::string percent_decode(std::string text) {
  if (text.empty()) return text;
  const char* end = uriUnescapeInPlaceExA(text.data(), URI_FALSE, URI_BR_DONT_TOUCH);
  text.resize(static_cast<std::size_t>(end - text.data()));
  return text;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Query keys whose values are credentials (ZooKeeper's ?digest=user:password, ...): redacted too.
bool is_secret_key(std::string_view key) {
  const std::string k = lower(std::string(key));
  for (const char* word : {"password", "passwd", "secret", "digest", "token", "auth", "key"})
    if (k.find(word) != std::string::npos) return true;
  return false;
}

[[noreturn]] void bad_uri(std::string_view raw, const std::string& what) {
  throw error(errc::invalid_uri, "invalid URI '" + redact_uri_text(raw) + "': " + what);
}

struct parsed_uri {
  UriUriA value{};
  bool ok = false;
  ~parsed_uri() {
    if (ok) uriFreeUriMembersA(&value);
  }
};

std::optional<std::uint16_t> parse_port(std::string_view raw, const std::string& text) {
  if (text.empty()) return std::nullopt;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535)
    bad_uri(raw, "port '" + text + "' is not a number from 1 to 65535");
  return static_cast<std::uint16_t>(value);
}

host_port host_of(std::string_view raw, const UriUriA& u) {
  host_port hp;
  hp.host = percent_decode(range_text(u.hostText));
  hp.port = parse_port(raw, range_text(u.portText));
  // "redis://:6379" is what "redis://${HOST}:6379" becomes with HOST unset: taking it as
  // localhost would give every machine a lock of its own.
  if (hp.host.empty() && hp.port)
    bad_uri(raw,
            "the host before ':" + std::to_string(*hp.port) +
                "' is empty (a variable left unset?); expected host:port, e.g. 127.0.0.1:" + std::to_string(*hp.port));
  return hp;
}

}  // namespace

std::string host_port::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string out = v6 ? "[" + host + "]" : host;
  if (port) out += ":" + std::to_string(*port);
  return out;
}

std::string redact_uri_text(std::string_view text) {
  std::string hidden = redact_userinfo(text);
  // Then the values of credential-carrying query keys (?digest=user:password).
  static const std::regex secret_value(R"(([?&][^=&#]*(password|passwd|secret|digest|token|auth|key)[^=&#]*=)[^&#]*)",
                                       std::regex::icase);
  return std::regex_replace(hidden, secret_value, "$1***");
}

std::string redact_userinfo(std::string_view text) {
  // The password may itself hold unescaped '/', '?' or ':' in text that failed to parse, so look
  // for the last '@' anywhere and hide everything from the first ':' of the authority up to it.
  const auto at = text.rfind('@');
  if (at == std::string_view::npos) return std::string(text);
  const auto scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos || scheme_end > at) {
    // The "//" is missing or mangled ("redis:/user:pw@h", "redis//user:pw@h"): where the userinfo
    // starts cannot be known, so hide all of it, from the end of the scheme and its punctuation.
    auto begin = text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    begin = std::min(text.find_first_not_of(":/", begin == std::string_view::npos ? 0 : begin), at);
    return std::string(text.substr(0, begin)) + "***" + std::string(text.substr(at));
  }
  const auto authority_begin = scheme_end + 3;
  const auto colon = text.find(':', authority_begin);
  if (colon == std::string_view::npos || colon > at) return std::string(text);
  return std::string(text.substr(0, colon + 1)) + "***" + std::string(text.substr(at));
}

uri uri::parse(std::string_view text) {
  const auto scheme_end = text.find("://");
  if (text.empty())
    bad_uri(text, "the URI is empty; expected scheme://host[:port][/path][?key=value], e.g. redis://127.0.0.1:6379");
  if (scheme_end == std::string_view::npos || scheme_end == 0)
    bad_uri(text, "expected scheme://..., e.g. redis://127.0.0.1:6379 or file:///var/lock/myapp");
  // uriparser decodes the query into C strings, which silently cut a value at a NUL byte
  // ("table=dl%00ck" read as "dl"; found by fuzz/), and the client libraries take C strings too
  // (libpq's conninfo, libmemcached's, ZooKeeper's paths). No component can hold one.
  if (text.find("%00") != std::string_view::npos)
    bad_uri(text, "'%00' (a NUL byte) is not allowed anywhere in a URI: the client libraries would cut the text there");

  // Split a host list out of the authority: "user:pw@h1:1,h2:2" -> userinfo + [h1:1, h2:2].
  const auto authority_begin = scheme_end + 3;
  const auto authority_end = std::min(text.find_first_of("/?#", authority_begin), text.size());
  std::string_view authority = text.substr(authority_begin, authority_end - authority_begin);
  std::string_view userinfo;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  std::vector<std::string_view> host_texts;
  for (std::size_t begin = 0;;) {
    const auto comma = authority.find(',', begin);
    host_texts.push_back(
        authority.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (host_texts.size() > 1 && std::any_of(host_texts.begin(), host_texts.end(), [](auto h) { return h.empty(); }))
    bad_uri(text, "empty host in the host list; expected host[:port],host[:port],...");

  // Parse the URI with only the first host in the authority.
  std::string single(text.substr(0, authority_begin));
  if (!userinfo.empty()) single.append(userinfo).append("@");
  single.append(host_texts.front()).append(text.substr(authority_end));
  parsed_uri p;
  const char* error_pos = nullptr;
  if (uriParseSingleUriA(&p.value, single.c_str(), &error_pos) != URI_SUCCESS) {
    // Map the position back onto the caller's text only when it lies before the host list.
    const auto pos = static_cast<std::size_t>(error_pos ? error_pos - single.c_str() : 0);
    bad_uri(text, "malformed at character " + std::to_string(pos + 1) +
                      "; expected scheme://[user[:password]@]host[:port][,host[:port]...][/path][?key=value&...]");
  }
  p.ok = true;
  if (p.value.fragment.first != nullptr) bad_uri(text, "a '#fragment' has no meaning here; remove it");

  uri u;
  u.scheme_ = lower(range_text(p.value.scheme));
  if (!userinfo.empty()) {
    const std::string info = range_text(p.value.userInfo);
    const auto colon = info.find(':');
    u.user_ = percent_decode(info.substr(0, colon));
    if (colon != std::string::npos) u.password_ = percent_decode(info.substr(colon + 1));
  }
  u.hosts_.push_back(host_of(text, p.value));
  for (std::size_t i = 1; i < host_texts.size(); ++i) {
    const std::string one = u.scheme_ + "://" + std::string(host_texts[i]);
    parsed_uri hp;
    if (uriParseSingleUriA(&hp.value, one.c_str(), &error_pos) != URI_SUCCESS)
      bad_uri(text, "host '" + std::string(host_texts[i]) + "' is not host[:port]");
    hp.ok = true;
    u.hosts_.push_back(host_of(text, hp.value));
  }
  if (u.hosts_.size() == 1 && u.hosts_.front().host.empty() && !u.hosts_.front().port) u.hosts_.clear();

  for (const UriPathSegmentA* seg = p.value.pathHead; seg != nullptr; seg = seg->next) {
    u.path_ += "/";
    u.path_ += percent_decode(range_text(seg->text));
  }

  if (p.value.query.first != nullptr && p.value.query.first != p.value.query.afterLast) {
    UriQueryListA* list = nullptr;
    int count = 0;
    if (uriDissectQueryMallocExA(&list, &count, p.value.query.first, p.value.query.afterLast, URI_FALSE,
                                 URI_BR_DONT_TOUCH) != URI_SUCCESS)
      bad_uri(text, "the query is not key=value&key=value");
    std::unique_ptr<UriQueryListA, void (*)(UriQueryListA*)> guard(list, uriFreeQueryListA);
    for (const UriQueryListA* q = list; q != nullptr; q = q->next) {
      std::string key = q->key ? q->key : "";
      if (key.empty()) bad_uri(text, "a query parameter has no name; expected key=value");
      if (u.has(key)) bad_uri(text, "parameter '" + key + "' is given twice");
      u.query_.emplace_back(std::move(key), q->value ? q->value : "");
    }
  }
  return u;
}

std::string uri::redacted() const {
  std::string out = scheme_ + "://";
  if (!user_.empty() || password_) {
    out += user_;
    if (password_) out += ":***";
    out += "@";
  }
  for (std::size_t i = 0; i < hosts_.size(); ++i) out += (i ? "," : "") + hosts_[i].to_string();
  out += path_;
  for (std::size_t i = 0; i < query_.size(); ++i)
    out += (i ? "&" : "?") + query_[i].first + "=" + (is_secret_key(query_[i].first) ? "***" : query_[i].second);
  return out;
}

bool uri::has(std::string_view key) const noexcept {
  return std::any_of(query_.begin(), query_.end(), [&](const auto& kv) { return kv.first == key; });
}

std::optional<std::string> uri::get(std::string_view key) const {
  for (const auto& [k, v] : query_)
    if (k == key) return v;
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> uri::get_duration(std::string_view key) const {
  const auto value = get(key);
  if (!value) return std::nullopt;
  try {
    return parse_duration(*value);
  } catch (const error& e) {
    // e.detail() says what is wrong with the value (not a duration, or longer than the limit);
    // it quotes the value, so a secret key's value is not repeated.
    if (is_secret_key(key))
      throw error(errc::invalid_uri, "parameter " + std::string(key) + "=*** in " + redacted() + " is not a duration");
    throw error(errc::invalid_uri, "parameter " + std::string(key) + " in " + redacted() + ": " + e.detail());
  }
}

std::optional<std::int64_t> uri::get_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  const auto value = get(key);
  if (!value) return std::nullopt;
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (ec != std::errc{} || end != value->data() + value->size() || n < min || n > max)
    throw error(errc::invalid_uri, "parameter " + std::string(key) + "='" +
                                       (is_secret_key(key) ? std::string("***") : *value) + "' in " + redacted() +
                                       " is not an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return n;
}

std::optional<bool> uri::get_bool(std::string_view key) const {
  const auto value = get(key);
  if (!value) return std::nullopt;
  const std::string v = lower(*value);
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  throw error(errc::invalid_uri, "parameter " + std::string(key) + "='" +
                                     (is_secret_key(key) ? std::string("***") : *value) + "' in " + redacted() +
                                     " is not a boolean; expected true or false");
}

void uri::require_known_keys(const std::vector<std::string>& accepted) const {
  for (const auto& [key, value] : query_) {
    if (std::find(accepted.begin(), accepted.end(), key) != accepted.end()) continue;
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
    throw error(errc::invalid_uri,
                "unknown parameter '" + key + "' in " + redacted() + "; " + scheme_ + " accepts: " + list);
  }
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  const auto fail = [&]() -> std::chrono::milliseconds {
    throw error(errc::invalid_argument,
                "'" + std::string(text) + "' is not a duration; expected a number and a unit: 500ms, 30s, 2m or 1h");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number(text.substr(0, i));
  const std::string_view unit = text.substr(i);
  if (number.empty() || number.front() == '.' || std::count(number.begin(), number.end(), '.') > 1) return fail();
  double value = 0;
  try {
    value = std::stod(number);
  } catch (...) {
    return fail();
  }
  double ms = 0;
  if (unit == "ms")
    ms = value;
  else if (unit == "s")
    ms = value * 1000;
  else if (unit == "m" || unit == "min")
    ms = value * 60'000;
  else if (unit == "h")
    ms = value * 3'600'000;
  else
    return fail();
  if (ms != std::floor(ms)) return fail();
  if (ms > static_cast<double>(std::chrono::milliseconds(longest_duration).count()))
    throw error(errc::invalid_argument, "'" + std::string(text) +
                                            "' is too long; the longest duration dlock accepts is " +
                                            format_duration(longest_duration) + " (10 years)");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace dlock
