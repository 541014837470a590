// The hook registry: a function-local map, so registrations from static initializers of other
// translation units (each backend's tests/hooks.cpp) never meet an unconstructed map.
#include "dlock_test/hooks.hpp"

#include <map>
#include <mutex>

namespace dlock::testing {
namespace {

struct hook_table {
  std::mutex mutex;
  std::map<std::string, backend_hooks, std::less<>> by_scheme;
};

hook_table& table() {
  static hook_table t;
  return t;
}

}  // namespace

bool register_hooks(std::string scheme, backend_hooks hooks) {
  auto& t = table();
  std::lock_guard guard(t.mutex);
  t.by_scheme.insert_or_assign(std::move(scheme), std::move(hooks));
  return true;
}

const backend_hooks* find_hooks(std::string_view scheme) {
  auto& t = table();
  std::lock_guard guard(t.mutex);
  const auto it = t.by_scheme.find(scheme);
  // Entries are never erased, and std::map nodes are stable: the pointer outlives the lock.
  return it == t.by_scheme.end() ? nullptr : &it->second;
}

}  // namespace dlock::testing
