// Fuzzes getlock_key, which maps a lock name to a MySQL/MariaDB GET_LOCK name.
// Properties: deterministic; at most 64 characters (MySQL 5.7+ refuses longer names); only bytes
// no collation folds ([a-z0-9._:/-], and '#' first for a hashed name), so a case-insensitive
// server cannot merge two keys; and two distinct names never share a key.
#include <cstdint>
#include <string>

#include "dlock_fuzz/check.hpp"
#include "getlock_key.hpp"

using dlock::fuzz::check;

namespace {

std::string checked_key(const std::string& name) {
  const std::string key = dlock::mysql::getlock_key(name);
  check(key == dlock::mysql::getlock_key(name), "deterministic", name);
  check(!key.empty() && key.size() <= dlock::mysql::getlock_max_key, "1 to 64 characters", name, key);
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    check(dlock::mysql::getlock_plain_byte(c) || (i == 0 && c == '#'), "only bytes no collation folds", name, key);
  }
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  if (a.empty() || b.empty() || a.size() > 1024 || b.size() > 1024) return 0;  // name_limits{} (1024)
  check((a == b) == (checked_key(a) == checked_key(b)), "distinct names, distinct keys", a, b);
  return 0;
}
