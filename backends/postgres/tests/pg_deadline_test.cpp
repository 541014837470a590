// A statement answered as the acquire's deadline shuts its socket down is a failure, never a good
// answer on a dead session (cut_after_answer.hpp), on a real PostgreSQL (DLOCK_POSTGRES_URI).
#include <gtest/gtest.h>

#include "cut_after_answer.hpp"
#include "dlock/uri.hpp"
#include "dlock_test/support.hpp"
#include "pg_connection.hpp"

namespace {

TEST(pg_deadline, a_statement_answered_as_its_socket_is_cut_is_a_failure_never_a_good_answer) {
  const auto connector = dlock::pg::make_connector(dlock::pg::pg_settings::from_uri(dlock::uri::parse(
      dlock::testing::with_scheme(dlock::testing::server_uri("DLOCK_POSTGRES_URI"), "postgres+index"))));
  const auto open = [&] {
    std::error_code ec;
    auto c = connector(std::chrono::seconds{5}, ec);
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
