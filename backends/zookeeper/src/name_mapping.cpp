#include "name_mapping.hpp"

#include <optional>

#include "dlock/spi.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper {

namespace {

// The next code point of UTF-8 `text` at `at` (advanced past it), or nullopt for a malformed,
// overlong or surrogate sequence.
std::optional<char32_t> next_code_point(std::string_view text, std::size_t& at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  const int length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || at + static_cast<std::size_t>(length) > text.size()) return std::nullopt;
  char32_t c = length == 1 ? lead : lead & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[at + static_cast<std::size_t>(i)]);
    if ((next & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (next & 0x3F);
  }
  static constexpr char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < smallest[length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  at += static_cast<std::size_t>(length);
  return c;
}

// ZooKeeper's PathUtils.validatePath (which Curator applies too) refuses these characters. It
// checks Java's UTF-16 units, so a code point above U+FFFF, a surrogate pair there, is refused too.
bool zookeeper_refuses(char32_t c) {
  return c <= 0x1F || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) || c >= 0xFFF0;
}

// True for a path component ZooKeeper stores: non-empty, not "." or "..", UTF-8 of characters
// it accepts.
bool storable(std::string_view component) {
  if (component.empty() || component == "." || component == "..") return false;
  for (std::size_t at = 0; at < component.size();) {
    const auto c = next_code_point(component, at);
    if (!c || zookeeper_refuses(*c)) return false;
  }
  return true;
}

// True when "<root>/<name>" is a path ZooKeeper accepts and that no other name's mapping can
// reach: every '/'-separated component non-empty, not "." or "..", of characters ZooKeeper
// accepts; not in ZooKeeper's own /zookeeper tree; not starting with '#' (the hashed forms); and
// no component below the first that reads as a lock node (it would sit among the lock nodes of
// the name above it as a contender that never leaves).
bool usable_as_path(const std::string& root, std::string_view name) {
  if (name.empty() || name.front() == '#') return false;
  std::size_t start = 0;
  for (bool first = true;; first = false) {
    const auto slash = name.find('/', start);
    const auto component = name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!storable(component)) return false;
    if (first && root.empty() && component == "zookeeper") return false;
    if (!first && sequence_of(component)) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// "#<up to 32 leading [A-Za-z0-9_:-] of the name>.<sha256 of the name>": the same form as
// spi::safe_key's (so names hashed before keep their folder), but for every name given, even
// one made only of those characters ("zookeeper" at the namespace root).
std::string hashed_folder(std::string_view name) {
  std::string head;
  for (const char c : name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '-';
    if (!plain || head.size() == 32) break;
    head += c;
  }
  return "#" + head + "." + spi::sha256_hex(name);
}

}  // namespace

std::string parent_path(const std::string& root, std::string_view name) {
  // As Curator's InterProcessMutex(client, "<root>/<name>") would name it, so that Curator and
  // kazoo services on that path contend with us: '/' makes nested folders, '.' is an ordinary
  // character. Only what ZooKeeper cannot store (or what would collide) is hashed, into
  // "#<readable head>.<sha256>": a name starting with '#' is always hashed, so a hashed form
  // never equals a name used as it is.
  return root + "/" + (usable_as_path(root, name) ? std::string(name) : hashed_folder(name));
}

bool usable_root(std::string_view root) {
  if (root.empty()) return true;
  if (!root.starts_with('/')) return false;
  for (std::size_t start = 1;;) {
    const auto slash = root.find('/', start);
    if (!storable(root.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start)))
      return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string refusal(const std::string& root, std::string_view name) {
  if (!name.starts_with('/')) return {};
  std::string message =
      "zookeeper: lock name '" + std::string(name) + "' starts with '/': a name is a path below the URI's path (" +
      (root.empty() ? std::string("none here: the namespace root") : "'" + root + "'") + "), not a ZooKeeper path";
  auto relative = name;
  while (relative.starts_with('/')) relative.remove_prefix(1);
  if (relative.empty() || !usable_as_path(root, relative)) return message + "; write the name without the leading '/'";
  const std::string path(name);
  if (!root.empty() && path.starts_with(root + "/")) {
    // "/dlock/x" under the root /dlock: the Curator or kazoo path of the name "x".
    const auto below = std::string_view(path).substr(root.size() + 1);
    if (usable_as_path(root, below))
      return message + "; for the node Curator and kazoo lock as '" + path + "', write '" + std::string(below) + "'";
  }
  message += "; for the node Curator and kazoo lock as '" + root + "/" + std::string(relative) + "', write '" +
             std::string(relative) + "'";
  if (!root.empty())
    message += "; for '" + path + "' itself, open a URI without a path (zookeeper://host:port) and write '" +
               std::string(relative) + "'";
  return message;
}

}  // namespace dlock::zookeeper
