// A stopped wait leaves nothing running on the MariaDB server (DLOCK_MYSQL_URI). MariaDB goes on
// with a statement whose client hung up until the statement ends by itself: a FOR UPDATE waiting
// for a row lock would stay queued for innodb_lock_wait_timeout, which a forever acquire sets to
// the maximum. Fails, never skips, without a server.
#include <gtest/gtest.h>

#include <cppconn/connection.h>

#include <chrono>
#include <optional>
#include <stop_token>
#include <system_error>
#include <thread>

#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace dlock::mysql;

// The statements other sessions are running on `table` (a table of the test's own), as the
// server lists them.
std::int64_t statements_on(::sql::Connection& c, const std::string& table) {
  return test::query_int(c,
                         "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                         "WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Sleep' AND INFO LIKE CONCAT('%', ?, '%')",
                         table)
      .value_or(-1);
}

TEST(MysqlStop, AStoppedForUpdateWaitIsEndedOnTheServer) {
  const auto table = test::unique_table("stop_forupdate");
  const auto uri = test::uri_for("mysql+forupdate", "table=" + table);
  const auto name = test::unique_name("stop");
  auto holder_backend = dlock::open(uri), waiter_backend = dlock::open(uri);
  auto held = holder_backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto raw = test::raw_connect(uri);

  auto waiter = waiter_backend->make_lock(name);
  std::stop_source stop;
  std::error_code ec;
  std::optional<dlock::lease> got;
  std::thread waiting([&] { got = waiter->acquire(stop.get_token(), ec); });
  const bool queued = dlock::testing::eventually([&] { return statements_on(*raw, table) == 1; });
  stop.request_stop();
  waiting.join();
  ASSERT_TRUE(queued) << "the waiter's FOR UPDATE never showed on the server";
  EXPECT_EQ(ec, std::errc::operation_canceled) << ec.message();
  EXPECT_FALSE(got && *got) << "a stopped acquire returned a lease";

  // Ended by the server well within the lock wait timeout (forever here), while the row is still held.
  EXPECT_TRUE(dlock::testing::eventually([&] { return statements_on(*raw, table) == 0; }, 10s))
      << "the stopped FOR UPDATE still waits on the server: " << statements_on(*raw, table) << " statement(s)";
  EXPECT_TRUE(held.held());
  held.release();
  EXPECT_TRUE(waiter_backend->make_lock(name)->try_acquire()) << "the stopped waiter left the row taken";
}

}  // namespace
