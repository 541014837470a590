// Fuzzes the postgres+advisory key: pg_advisory_lock(key) with key = spi::sha256_int64(name)
// (src/advisory.cpp), the first 8 bytes of SHA-256(name), big-endian, as a signed bigint.
// Properties: deterministic; equal to the first 16 hex digits of sha256_hex(name) read as a
// big-endian 64-bit number (what the README documents and another client would compute to
// contend with us); and distinct names give distinct keys (a 64-bit collision is not expected
// on inputs a fuzzer finds, so one would point at a broken mapping, not at bad luck).
#include <charconv>
#include <cstdint>
#include <string>

#include "dlock/spi.hpp"
#include "dlock_fuzz/check.hpp"

using dlock::fuzz::check;

namespace {

std::int64_t checked_key(const std::string& name) {
  const std::int64_t key = dlock::spi::sha256_int64(name);
  check(key == dlock::spi::sha256_int64(name), "deterministic", name);
  const std::string hex = dlock::spi::sha256_hex(name).substr(0, 16);
  std::uint64_t expected = 0;
  const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), expected, 16);
  check(ec == std::errc{} && end == hex.data() + hex.size(), "sha256_hex gives hex digits", name, hex);
  check(static_cast<std::uint64_t>(key) == expected, "the key is the first 8 bytes of SHA-256, big-endian", name, hex);
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  if (a.empty() || b.empty() || a.size() > (1 << 20) || b.size() > (1 << 20)) return 0;  // name_limits{1 << 20}
  check((a == b) == (checked_key(a) == checked_key(b)), "distinct names, distinct keys", a, b);
  return 0;
}
