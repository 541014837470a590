#pragma once
// The watchdog's batched renewal of the index and version strategies (renew_many in
// dlock_sql/dialect.hpp), shared by the PostgreSQL and MySQL backend tests: the leases that fall due together are
// renewed in one statement, and each lease's outcome is its own, as its single renewal would report it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace dlock::sql::testing {

// `b` is an index or version backend with ttl=3s and the watchdog on (renewals every second). `tamper`
// acts on the server directly: it deletes the row of `deleted`, and gives the row of `stolen` to
// another owner with a live expiry (as if ours had expired and been taken over).
// `reentrant`: the backend grants a lock object's second acquire (index), which the test then holds too.
inline void expect_batched_renewal(
    dlock::backend& b, bool reentrant,
    const std::function<void(const std::string& deleted, const std::string& stolen)>& tamper) {
  using namespace std::chrono_literals;
  constexpr int count = 300;
  constexpr int deleted = count / 3, stolen = 2 * count / 3;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  std::vector<dlock::lease> leases;
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.push_back(dlock::testing::unique_name("batch"));
    locks.push_back(b.make_lock(names.back()));
    leases.push_back(locks.back()->try_acquire());
    ASSERT_TRUE(leases.back()) << names.back();
  }
  // Two leases of one row (a re-entry: same name, same owner): one row to extend, two outcomes.
  dlock::lease reentered;
  if (reentrant) {
    reentered = locks[0]->try_acquire();
    ASSERT_TRUE(reentered);
  }
  tamper(names[deleted], names[stolen]);
  const auto before = dlock::current_watchdog_load();
  std::this_thread::sleep_for(5s);  // five renewal periods, and the ttl passed
  const auto after = dlock::current_watchdog_load();
  const auto renewed = after.renewals - before.renewals, calls = after.renewal_calls - before.renewal_calls;
  EXPECT_GE(renewed, 3u * (count - 2)) << "leases renewed in 5 s";
  EXPECT_LE(calls * 10, renewed) << renewed << " renewals in " << calls << " calls: not batched";
  for (int i = 0; i < count; ++i) {
    if (i == deleted || i == stolen) {
      EXPECT_TRUE(leases[i].lost_token().stop_requested()) << names[i] << ": its row is gone, yet not reported lost";
      continue;
    }
    EXPECT_FALSE(leases[i].lost_token().stop_requested()) << names[i] << " lost";
    EXPECT_GT(leases[i].valid_until(), std::chrono::steady_clock::now()) << names[i];
  }
  if (reentrant) {
    EXPECT_FALSE(reentered.lost_token().stop_requested());
    EXPECT_GT(reentered.valid_until(), std::chrono::steady_clock::now());
  }
  // The stolen row stays the other owner's: the batch extends only rows that are ours.
  EXPECT_FALSE(b.make_lock(names[stolen])->try_acquire()) << "the other owner's row was changed";
  // Released one every 2 ms, across several renewal rounds: a lease released while its batch is
  // in flight releases cleanly and is never reported lost.
  std::error_code ec;
  if (reentrant) {
    reentered.release(ec);
    EXPECT_FALSE(ec) << ec.message();
  }
  for (int i = 0; i < count; ++i) {
    if (i == deleted || i == stolen) continue;
    leases[i].release(ec);
    EXPECT_FALSE(ec) << names[i] << ": " << ec.message();
    std::this_thread::sleep_for(2ms);
  }
  for (int i = 0; i < count; ++i) {
    if (i == deleted || i == stolen) continue;
    EXPECT_FALSE(leases[i].lost_token().stop_requested()) << names[i] << " reported lost after its release";
  }
  EXPECT_TRUE(b.make_lock(names[0])->try_acquire()) << "the re-entered row was not deleted at its last release";
}

}  // namespace dlock::sql::testing
