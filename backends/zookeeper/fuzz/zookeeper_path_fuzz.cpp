// Fuzzes parent_path, which maps a lock name to the ZooKeeper folder of its lock nodes.
// Properties: deterministic; the path is "<root>/..." with every component non-empty and not
// "." or "..", no NUL or ASCII control byte, and never inside ZooKeeper's own /zookeeper tree; a
// hashed name is one component (it cannot reach into another name's folder); and two distinct
// names never share a folder.
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock_fuzz/check.hpp"
#include "name_mapping.hpp"

using dlock::fuzz::check;

namespace {

std::string checked_path(const std::string& root, const std::string& name) {
  const std::string path = dlock::zookeeper::parent_path(root, name);
  check(path == dlock::zookeeper::parent_path(root, name), "deterministic", name);
  check(path.starts_with(root + "/"), "the path is under the root", name, path);
  const std::string_view below = std::string_view(path).substr(root.size() + 1);
  std::size_t start = 0;
  while (true) {
    const auto slash = below.find('/', start);
    const auto component =
        below.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    check(!component.empty() && component != "." && component != "..", "no empty, '.' or '..' component", name, path);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (const unsigned char c : path) check(c >= 0x20 && c != 0x7f, "no NUL or control byte", name, path);
  if (root.empty()) check(path != "/zookeeper" && !path.starts_with("/zookeeper/"), "not in /zookeeper", name, path);
  if (path.substr(root.size() + 1) != name)
    check(below.starts_with('#') && below.find('/') == std::string_view::npos, "a hashed name is one component", name,
          path);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  if (a.empty() || b.empty() || a.size() > 1024 || b.size() > 1024) return 0;  // name_limits{} (1024)
  for (const std::string root : {"", "/dlock", "/app/locks"})
    check((a == b) == (checked_path(root, a) == checked_path(root, b)), "distinct names, distinct folders", a, b);
  return 0;
}
