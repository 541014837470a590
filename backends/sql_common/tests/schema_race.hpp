#pragma once
// The SQL backends' "schema creation racing from several processes" test, written once for
// PostgreSQL and MariaDB: `processes` separate processes (dlock_sql_race_worker, started with
// posix_spawn) open the same URI -- a table nobody created yet, create_table=true -- at the same
// wall-clock instant, then all take turns on one lock. Every open must succeed, and the lock must
// still exclude: no overlap seen, and no lost update of the shared counter.
// Needs DLOCK_SQL_RACE_WORKER (the worker's path) and dlock_test_support (child_process).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dlock_test/support.hpp"

namespace dlock::sql::testing {

inline void expect_schema_race(const std::string& uri, const std::string& lock_name, int processes = 6,
                               int iterations = 5) {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("dlock-schema-race-" + dlock::testing::unique_name("d"));
  fs::create_directories(dir);
  const auto counter = (dir / "counter").string();
  std::ofstream(counter) << 0 << '\n';
  using namespace std::chrono;
  // Far enough ahead for every process to be exec'ed and loaded on a busy 2-core machine.
  const auto start = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() + 2500;
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (int i = 0; i < processes; ++i)
    children.push_back(std::make_unique<dlock::testing::child_process>(std::vector<std::string>{
        DLOCK_SQL_RACE_WORKER, uri, lock_name, counter, std::to_string(iterations), std::to_string(start)}));
  int opened = 0;
  for (auto& c : children)
    if (c->read_line(seconds{60}) == std::optional<std::string>("opened")) ++opened;
  EXPECT_EQ(opened, processes) << "every racing process must open the backend (and create or find the table)";
  for (std::size_t i = 0; i < children.size(); ++i) {
    const auto status = children[i]->wait(seconds{120});
    EXPECT_EQ(status, std::optional<int>(0))
        << "process " << i << ": 2 = open or lock failed (see its stderr above), 3 = two holders at once";
  }
  long total = -1;
  std::ifstream(counter) >> total;
  EXPECT_EQ(total, static_cast<long>(processes) * iterations) << "an update was lost: the lock did not exclude";
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace dlock::sql::testing
