// Fuzzes the Redis backends' key layout (keys_for, redisson_prefix_name) for every mode.
// Properties: deterministic; the lock key is prefix + name, so distinct names never share a lock
// key; one lock's keys are pairwise distinct; every derived name (fencing counter, channels,
// queue, timeout, the waiting-writers set, the semaphore's permits) carries the lock key inside a
// {hash tag}. Redisson's prefixName omits the braces when the key already has a '{', so "a" and
// "{a}" share derived names: that is the layout Redisson services use (kept for compatibility),
// and the only collision allowed below. On a cluster, a key without braces (a name without
// braces, with or without a prefix that has none) puts every key of its lock in one slot.
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster.hpp"
#include "dlock_fuzz/check.hpp"
#include "redis_keys.hpp"

using dlock::fuzz::check;
using dlock::redis::key_names;
using dlock::redis::mode;

namespace {

// Redisson's one collision: b == "{" + a + "}" where a has no '{' (or the other way round).
bool redisson_twins(std::string_view a, std::string_view b) {
  const auto braced = [](std::string_view inner, std::string_view outer) {
    return inner.find('{') == std::string_view::npos && outer.size() == inner.size() + 2 && outer.front() == '{' &&
           outer.back() == '}' && outer.substr(1, inner.size()) == inner;
  };
  return braced(a, b) || braced(b, a);
}

void check_one(std::string_view prefix, mode m, const std::string& name) {
  const key_names k = dlock::redis::keys_for(prefix, m, name);
  const key_names again = dlock::redis::keys_for(prefix, m, name);
  check(k.key == again.key && k.fence == again.fence && k.channel == again.channel && k.queue == again.queue &&
            k.timeout == again.timeout && k.waiting == again.waiting && k.permits == again.permits &&
            k.rw_channel == again.rw_channel,
        "deterministic", name);
  check(k.key == std::string(prefix) + name, "the lock key is prefix + name", name, k.key);
  check(k.fence != k.key && k.channel != k.key && k.channel != k.fence && k.waiting != k.key && k.permits != k.key &&
            k.rw_channel != k.key && k.waiting != k.permits && k.rw_channel != k.channel,
        "one lock's keys are distinct", name);
  if (m == mode::fair) check(k.queue != k.timeout && k.queue != k.key, "one lock's queue keys are distinct", name);
  check(k.fence.find(k.key) != std::string::npos, "the fencing key carries the lock key", name, k.fence);
  // On a cluster every key of a lock must share a slot (redis+cluster:// refuses a name whose keys
  // do not): a lock key with no brace always gets one slot, as Redisson's layout promises. (A '}'
  // alone does not: it closes the derived names' tag early, "redisson_lock_token:{a}b}".)
  if (k.key.find_first_of("{}") == std::string::npos) {
    const auto slot = dlock::redis::key_slot(k.key);
    check(
        dlock::redis::key_slot(k.fence) == slot && dlock::redis::key_slot(k.channel) == slot &&
            dlock::redis::key_slot(k.waiting) == slot && dlock::redis::key_slot(k.permits) == slot &&
            dlock::redis::key_slot(k.rw_channel) == slot &&
            (m != mode::fair || (dlock::redis::key_slot(k.queue) == slot && dlock::redis::key_slot(k.timeout) == slot)),
        "a lock key without braces puts all its keys in one cluster slot", name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  // The Redis backends accept names of 1 to 4096 bytes.
  if (a.empty() || b.empty() || a.size() > 4096 || b.size() > 4096) return 0;
  for (const std::string_view prefix : {std::string_view(), std::string_view("app:")}) {
    for (const mode m : {mode::simple, mode::reentrant, mode::fair}) {
      check_one(prefix, m, a);
      check_one(prefix, m, b);
      const key_names ka = dlock::redis::keys_for(prefix, m, a);
      const key_names kb = dlock::redis::keys_for(prefix, m, b);
      check((a == b) == (ka.key == kb.key), "distinct names, distinct lock keys", a, b);
      // The derived names are made from the lock key, as Redisson's.
      const bool twins = redisson_twins(ka.key, kb.key);
      if (a != b && !twins)
        check(ka.fence != kb.fence && ka.channel != kb.channel, "distinct names, distinct derived keys", a, b);
    }
  }
  return 0;
}
