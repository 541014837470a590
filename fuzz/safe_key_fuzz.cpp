// Fuzzes dlock::spi::safe_key, the name-to-key mapping the file, memcached and ZooKeeper backends
// build on, over limits and allowed byte sets chosen by the input.
// Properties: deterministic; the key fits max_key_length; a key either is the name (which then
// fits and has only allowed bytes) or starts with the hashed prefix followed only by allowed
// bytes, '.' and hex digits; and two distinct names never get the same key.
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/spi.hpp"
#include "dlock_fuzz/check.hpp"

using dlock::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string_view prefix = in.ConsumeBool() ? "#" : "~h:";
  // safe_key requires room for the prefix, '.' and 64 hex digits.
  const std::size_t max_length = in.ConsumeIntegralInRange<std::size_t>(prefix.size() + 65, 300);
  const auto low = in.ConsumeIntegral<unsigned char>();
  const auto high = in.ConsumeIntegral<unsigned char>();
  const auto allowed = [low, high](unsigned char c) { return c >= low && c <= high && c != '#' && c != '~'; };
  const std::string a = in.ConsumeRandomLengthString(600);
  const std::string b = in.ConsumeRemainingBytesAsString();

  const std::string key_a = dlock::spi::safe_key(a, max_length, allowed, prefix);
  const std::string key_b = dlock::spi::safe_key(b, max_length, allowed, prefix);
  check(key_a == dlock::spi::safe_key(a, max_length, allowed, prefix), "deterministic", a);
  check(key_a.size() <= max_length, "the key fits max_key_length", a, key_a);
  if (key_a == a) {
    check(!a.starts_with(prefix), "a name used as it is does not start with the prefix", a);
    for (const unsigned char c : a) check(allowed(c), "a name used as it is has only allowed bytes", a);
  } else {
    check(key_a.starts_with(prefix), "a hashed key starts with the prefix", a, key_a);
    for (const unsigned char c : std::string_view(key_a).substr(prefix.size()))
      check(allowed(c) || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'),
            "a hashed key has only allowed bytes, '.' and hex digits", a, key_a);
  }
  check((a == b) == (key_a == key_b), "distinct names, distinct keys", a, b);
  return 0;
}
