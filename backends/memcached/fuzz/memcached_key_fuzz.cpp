// Fuzzes keys_for, which maps a lock name to its memcached keys.
// Properties: deterministic; every key within memcached's 250 bytes and free of spaces and
// control bytes (the text protocol would split or refuse it); the lock and fence keys of a name
// differ; and two distinct names never share a key (nor the group their keys are hashed by).
#include <cstdint>
#include <string>
#include <string_view>

#include "client_pool.hpp"
#include "dlock_fuzz/check.hpp"

using dlock::fuzz::check;

namespace {

void check_key(const std::string& name, const std::string& key) {
  check(!key.empty() && key.size() <= dlock::memcached::max_key_bytes, "a key has 1 to 250 bytes", name, key);
  for (const unsigned char c : key) check(c > 0x20 && c < 0x7f, "a key has no space or control byte", name, key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  if (a.empty() || b.empty() || a.size() > 1024 || b.size() > 1024) return 0;  // name_limits{} (1024)
  for (const std::string_view prefix : {std::string_view(), std::string_view("dlock:")}) {
    const auto ka = dlock::memcached::keys_for(prefix, a);
    const auto kb = dlock::memcached::keys_for(prefix, b);
    const auto again = dlock::memcached::keys_for(prefix, a);
    check(ka.group == again.group && ka.lock == again.lock && ka.fence == again.fence, "deterministic", a);
    for (const auto& k : {ka.group, ka.lock, ka.fence}) check_key(a, k);
    check(ka.lock != ka.fence, "a name's lock and fence keys differ", a);
    check((a == b) == (ka.group == kb.group), "distinct names, distinct groups", a, b);
    check((a == b) == (ka.lock == kb.lock), "distinct names, distinct lock keys", a, b);
    check(ka.lock != kb.fence, "no lock key is another name's fence key", a, b);
  }
  return 0;
}
