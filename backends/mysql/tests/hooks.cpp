// Conformance hooks for the mysql schemes, through raw Connector/C++ (the probe must not trust
// the code under test). mysql+getlock: the saboteur KILLs the connection the server names as the
// holder (IS_USED_LOCK), the way an operator or a failover ends a session; the probe asks
// IS_USED_LOCK.
#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/statement.h>

#include <memory>
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

// IS_USED_LOCK names the holding connection (not the owner id); force_release KILLs it.
DLOCK_TEST_HOOKS("mysql+getlock",
                 {.break_lock = getlock_break,
                  .is_held_on_server = getlock_held,
                  .inspection = {.inspect = true,
                                 .list = false,
                                 .force_release = true,
                                 .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id}});

// The table strategies, on their default tables (the conformance URIs set no table=).
namespace {

void exec(::sql::Connection& c, const std::string& text, const std::string& name) {
  std::unique_ptr<::sql::PreparedStatement> st(c.prepareStatement(text));
  st->setString(1, name);
  st->executeUpdate();
}

// An operator expiring the row by hand (what a cleanup script does); the holder's renewals then
// fail and the watchdog fires lost.
void index_break(const std::string& uri, const dlock::lease& held) {
  auto c = test::raw_connect(uri);
  exec(*c, "DELETE FROM dlock_index WHERE name = ?", std::string(held.name()));
}
bool index_held(const std::string& uri, std::string_view name) {
  auto c = test::raw_connect(uri);
  return test::query_int(*c, "SELECT COUNT(*) FROM dlock_index WHERE name = ? AND expires_at > NOW(6)",
                         std::string(name)) == 1;
}
void version_break(const std::string& uri, const dlock::lease& held) {
  auto c = test::raw_connect(uri);
  exec(*c, "UPDATE dlock_version SET owner = NULL, expires_at = NULL, version = version + 1 WHERE name = ?",
       std::string(held.name()));
}
bool version_held(const std::string& uri, std::string_view name) {
  auto c = test::raw_connect(uri);
  return test::query_int(*c,
                         "SELECT COUNT(*) FROM dlock_version WHERE name = ? AND owner IS NOT NULL AND "
                         "expires_at > NOW(6)",
                         std::string(name)) == 1;
}
// KILL the connection whose open transaction holds the row (it wrote its CONNECTION_ID() into
// the row, visible to a dirty read).
void forupdate_break(const std::string& uri, const dlock::lease& held) {
  auto c = test::raw_connect(uri);
  std::unique_ptr<::sql::Statement>(c->createStatement())
      ->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
  const auto holder =
      test::query_int(*c, "SELECT holder FROM dlock_forupdate WHERE name = ?", std::string(held.name()));
  if (!holder) throw std::runtime_error("mysql+forupdate hook: no holder recorded");
  test::kill_connection(*c, *holder);
}
bool forupdate_held(const std::string& uri, std::string_view name) {
  auto c = test::raw_connect(uri);
  c->setAutoCommit(false);
  try {
    test::query_int(*c, "SELECT fence FROM dlock_forupdate WHERE name = ? FOR UPDATE NOWAIT", std::string(name));
    c->rollback();
    return false;
  } catch (const ::sql::SQLException& e) {
    if (e.getErrorCode() == 1205 || e.getErrorCode() == 3572) return true;
    throw;
  }
}

}  // namespace

// The index and version rows record the owner id; force_release deletes (index) or frees
// (version) the row. forupdate: the dirty read names the holding connection, which
// force_release KILLs.
DLOCK_TEST_HOOKS("mysql+index", {.break_lock = index_break,
                                 .is_held_on_server = index_held,
                                 .inspection = {.inspect = true, .list = true, .force_release = true}});
DLOCK_TEST_HOOKS("mysql+version", {.break_lock = version_break,
                                   .is_held_on_server = version_held,
                                   .inspection = {.inspect = true, .list = true, .force_release = true}});
DLOCK_TEST_HOOKS("mysql+forupdate",
                 {.break_lock = forupdate_break,
                  .is_held_on_server = forupdate_held,
                  .inspection = {.inspect = true,
                                 .list = true,
                                 .force_release = true,
                                 .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id}});
