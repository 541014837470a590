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
  const auto open = [&] {
    std::error_code ec;
    auto c = dlock::mysql::open_sql_connection(settings, ec);
    if (!c) ADD_FAILURE() << "cannot connect: " << ec.message();
    return c;
  };
  const auto counts = dlock::sql_testing::race_deadlines_against_answers(open, 2000);
  EXPECT_EQ(counts.answered_dead, 0) << counts.answered_dead << " statements reported good on a connection cut as "
                                     << "they were answered (" << counts.answered << " good, " << counts.cut << " cut)";
  // The race was run: both outcomes happened.
  EXPECT_GT(counts.answered, 0);
  EXPECT_GT(counts.cut, 0);
}

}  // namespace
