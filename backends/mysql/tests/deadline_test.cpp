// A statement answered as the acquire's deadline shuts its socket down is a failure, never a good
// answer on a dead session (cut_after_answer.hpp), on a real MariaDB (DLOCK_MYSQL_URI).
#include <gtest/gtest.h>

#include "../src/sql_connection.hpp"
#include "cut_after_answer.hpp"
#include "dlock/uri.hpp"
#include "test_support.hpp"

namespace {

TEST(MysqlDeadline, AStatementAnsweredAsItsSocketIsCutIsAFailureNeverAGoodAnswer) {
  const auto settings =
      dlock::mysql::connection_settings::from_uri(dlock::uri::parse(dlock::mysql::test::uri_for("mysql+index")));
  dlock::sql_testing::expect_answers_cut_as_they_come_to_be_failures(
      [&](std::error_code& ec) { return dlock::mysql::open_sql_connection(settings, ec); });
}

}  // namespace
