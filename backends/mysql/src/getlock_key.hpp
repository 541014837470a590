#pragma once
// How a lock name becomes a GET_LOCK name. Header-only so the conformance hooks use the very same
// mapping (they include it by relative path).
//
// MySQL 5.7+ refuses GET_LOCK names over 64 characters, and older servers and some collations
// compare them case-insensitively; MariaDB 10.11 (measured) accepts longer names and compares
// them byte for byte. To be safe on all of them, a name is used as it is only if it has at most
// 64 bytes, each one of [a-z0-9._:/-] (no upper case, nothing a collation could fold), and it does
// not start with '#'. Every other name becomes
//     '#' + the first 63 hex digits of SHA-256(name)        (64 characters, 252 bits)
// which starts with '#', so it never equals a name used as it is; two hashed names collide only
// if SHA-256 truncated to 252 bits does. spi::safe_key cannot be used: its hashed form needs at
// least 66 characters.
#include <string>
#include <string_view>

#include "dlock/spi.hpp"

namespace dlock::mysql {

inline constexpr std::size_t getlock_max_key = 64;

inline bool getlock_plain_byte(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
}

inline std::string getlock_key(std::string_view name) {
  bool plain = !name.empty() && name.size() <= getlock_max_key && name.front() != '#';
  for (unsigned char c : name) plain = plain && getlock_plain_byte(c);
  if (plain) return std::string(name);
  return "#" + spi::sha256_hex(name).substr(0, getlock_max_key - 1);
}

}  // namespace dlock::mysql
