#pragma once
// A statement inside an acquire's deadline whose socket the deadline shuts down as its answer
// arrives (dlock_sql/deadline.hpp). The server ends a session whose socket is shut down, and an
// advisory lock, a GET_LOCK or a row lock the statement was granted goes with it, so an answer
// that came as the cut fell must be reported as a failure: a statement reported good must leave
// its connection alive. Each statement's deadline falls at a random point around the time one
// takes, so that some land in the instant between the answer and the end of the watch.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iostream>
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
  using std::chrono::nanoseconds;
  const auto select_one = [](sql::connection& c, sql::sql_error& err) {
    sql::result out;
    return c.execute("SELECT 1", {}, out, err);
  };
  // A new connection that has answered once (a server's first statement on a session is slower).
  const auto reopen = [&] {
    auto c = open();
    sql::sql_error err;
    if (c) {
      EXPECT_TRUE(select_one(*c, err)) << err.message;
    }
    return c;
  };
  auto c = reopen();
  if (!c) return {};
  // The median time of one statement, inside a deadline that never falls (the watch's cost counted).
  std::vector<nanoseconds> times;
  for (int i = 0; i < 51; ++i) {
    sql::sql_error err;
    const spi::deadline_scope far_off(clock::now() + std::chrono::hours{1});
    const auto start = clock::now();
    EXPECT_TRUE(select_one(*c, err)) << err.message;
    times.push_back(clock::now() - start);
  }
  std::nth_element(times.begin(), times.begin() + 25, times.end());
  // A staircase: the cut moves later after a cut and earlier after an answer, so it keeps falling
  // about where the answers come, jittered by a step either way.
  const auto step = std::max(times[25] / 16, nanoseconds{1000});
  auto offset = times[25];
  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<long long> jitter(-step.count(), step.count());
  cut_counts counts;
  for (int i = 0; i < statements && c; ++i) {
    bool reported_good = false;
    sql::sql_error err;
    {
      // io_deadline() = the deadline + deadline_grace: the cut falls about `offset` after now.
      const spi::deadline_scope scope(clock::now() - spi::deadline_grace + offset + nanoseconds(jitter(random)));
      reported_good = select_one(*c, err);
    }
    if (!reported_good) {
      ++counts.cut;
      offset += step;
      c = reopen();
      continue;
    }
    offset = std::max(offset - step, step);
    // Outside any deadline now: nothing may shut this socket down any more.
    if (select_one(*c, err)) {
      ++counts.answered;
    } else {
      ++counts.answered_dead;
      c = reopen();
    }
  }
  std::cout << statements << " statements, the cut about " << offset.count()
            << " ns after each began at the end: " << counts.answered << " answered, " << counts.cut << " cut, "
            << counts.answered_dead << " answered on a dead connection\n";
  return counts;
}

// `open(ec)` returns a new connection, or nullptr with ec set. 2,000 statements race their cuts:
// none may be reported good on a connection that no longer answers, and both outcomes must
// have happened (the race was run).
template <class Open>
void expect_answers_cut_as_they_come_to_be_failures(Open open) {
  const auto counts = race_deadlines_against_answers(
      [&] {
        std::error_code ec;
        auto c = open(ec);
        if (!c) ADD_FAILURE() << "cannot connect: " << ec.message();
        return c;
      },
      2000);
  EXPECT_EQ(counts.answered_dead, 0) << counts.answered_dead << " statements reported good on a connection cut as "
                                     << "they were answered (" << counts.answered << " good, " << counts.cut << " cut)";
  EXPECT_GT(counts.answered, 0);
  EXPECT_GT(counts.cut, 0);
}

}  // namespace dlock::sql_testing
