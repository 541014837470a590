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
  dlock::sql_testing::expect_answers_cut_as_they_come_to_be_failures(
      [&](std::error_code& ec) { return connector(std::chrono::seconds{5}, ec); });
}

}  // namespace
