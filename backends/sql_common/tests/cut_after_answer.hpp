#pragma once
// A statement inside an acquire's deadline whose socket the deadline shuts down as its answer
// arrives (dlock_sql/deadline.hpp). The server ends a session whose socket is shut down, and an
// advisory lock, a GET_LOCK or a row lock the statement was granted goes with it, so an answer
// that came as the cut fell must be reported as a failure: a statement reported good must leave
// its connection alive. Each statement's deadline falls at a random point around the time one
// takes, so that some land in the instant between the answer and the end of the watch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dlock/acquire_deadline.hpp"
#include "dlock_sql/connection.hpp"

namespace dlock::sql_testing {

struct cut_counts {
  int answered = 0;       // reported good, and the connection then answered SELECT 1
  int cut = 0;            // reported as a failure (cut by the deadline, before or after the answer)
  int answered_dead = 0;  // reported good on a connection that no longer answers: the defect
};

// `open()` returns a new connection (std::unique_ptr<sql::connection>) or fails the test.
template <class Open>
cut_counts race_deadlines_against_answers(Open open, int statements) {
  using clock = std::chrono::steady_clock;
  const auto select_one = [](sql::connection& c, sql::sql_error& err) {
    sql::result out;
    return c.execute("SELECT 1", {}, out, err);
  };
  auto c = open();
  // The median time of one statement on this machine, outside any deadline.
  std::vector<clock::duration> times;
  for (int i = 0; i < 51; ++i) {
    sql::sql_error err;
    const auto start = clock::now();
    EXPECT_TRUE(select_one(*c, err)) << err.message;
    times.push_back(clock::now() - start);
  }
  std::nth_element(times.begin(), times.begin() + 25, times.end());
  const auto median = times[25];

  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<long long> offset(std::chrono::nanoseconds(median / 2).count(),
                                                  std::chrono::nanoseconds(median * 3 / 2).count());
  cut_counts counts;
  for (int i = 0; i < statements; ++i) {
    bool reported_good = false;
    sql::sql_error err;
    {
      // io_deadline() = the deadline + deadline_grace: the cut falls `offset` after now.
      const spi::deadline_scope scope(clock::now() - spi::deadline_grace + std::chrono::nanoseconds(offset(random)));
      reported_good = select_one(*c, err);
    }
    if (!reported_good) {
      ++counts.cut;
      c = open();
      continue;
    }
    // Outside any deadline now: nothing may shut this socket down any more.
    if (select_one(*c, err)) {
      ++counts.answered;
    } else {
      ++counts.answered_dead;
      c = open();
    }
  }
  return counts;
}

}  // namespace dlock::sql_testing
