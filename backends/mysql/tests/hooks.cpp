// Conformance hooks for the mysql schemes, through raw Connector/C++ (the probe must not trust
// the code under test). mysql+getlock: the saboteur KILLs the connection the server names as the
// holder (IS_USED_LOCK), the way an operator or a failover ends a session; the probe asks
// IS_USED_LOCK.
#include <stdexcept>

#include "../src/getlock_key.hpp"
#include "dlock_test/hooks.hpp"
#include "test_support.hpp"

namespace {

using namespace dlock::mysql;

void getlock_break(const std::string& uri, const dlock::lease& held) {
  auto c = test::raw_connect(uri);
  const auto holder = test::query_int(*c, "SELECT IS_USED_LOCK(?)", getlock_key(held.name()));
  if (!holder) throw std::runtime_error("mysql+getlock hook: nobody holds '" + std::string(held.name()) + "'");
  test::kill_connection(*c, *holder);
}

bool getlock_held(const std::string& uri, std::string_view name) {
  auto c = test::raw_connect(uri);
  return test::query_int(*c, "SELECT IS_USED_LOCK(?) IS NOT NULL", getlock_key(name)) == 1;
}

}  // namespace

DLOCK_TEST_HOOKS("mysql+getlock", {.break_lock = getlock_break, .is_held_on_server = getlock_held});
