// Conformance hooks for the four postgres+* schemes.
#include "dlock_test/hooks.hpp"
#include "pg_probe.hpp"

namespace {
dlock::testing::backend_hooks pg_hooks() {
  return {.break_lock = [](const std::string& uri,
                           const dlock::lease& held) { dlock::pg::testing::break_lock(uri, held.name()); },
          .is_held_on_server = [](const std::string& uri,
                                  std::string_view name) { return dlock::pg::testing::held_on_server(uri, name); }};
}
// postgres+advisory: pg_locks names the holding session (not the owner id), and force_release
// terminates it.
dlock::testing::backend_hooks advisory_hooks() {
  auto h = pg_hooks();
  h.inspection = {.inspect = true,
                  .list = false,
                  .force_release = true,
                  .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id};
  return h;
}
// postgres+index and +version: the row records the owner id; force_release deletes (index) or
// frees (version) it.
dlock::testing::backend_hooks table_hooks() {
  auto h = pg_hooks();
  h.inspection = {.inspect = true, .list = true, .force_release = true};
  return h;
}
// postgres+forupdate: the row's xmax and pg_locks name the holding session; force_release
// terminates it.
dlock::testing::backend_hooks forupdate_hooks() {
  auto h = pg_hooks();
  h.inspection = {.inspect = true,
                  .list = true,
                  .force_release = true,
                  .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id};
  return h;
}
}  // namespace

DLOCK_TEST_HOOKS("postgres+index", {table_hooks()});
DLOCK_TEST_HOOKS("postgres+forupdate", {forupdate_hooks()});
DLOCK_TEST_HOOKS("postgres+version", {table_hooks()});
DLOCK_TEST_HOOKS("postgres+advisory", {advisory_hooks()});
