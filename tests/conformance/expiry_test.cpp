#include <future>
#include <optional>
#include <string>
#include <vector>

#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, KilledHolderProcess) {
  const auto name = dlock::testing::unique_name("killed");
  const auto ttl = 1000ms;
  dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold", uri_, name, std::to_string(ttl.count())});
  const auto line = holder.read_line(15s);
  ASSERT_TRUE(line && line->starts_with("acquired")) << "the holder process did not acquire";
  auto other = make(name);
  if (backend_->scope() == lock_scope::process) {
    EXPECT_TRUE(other->try_acquire()) << "a process-scoped lock excluded another process";
    return;
  }
  EXPECT_FALSE(other->try_acquire()) << "acquired while another process holds";
  holder.kill_hard();
  holder.wait(10s);
  if (has(capability::expiring)) {
    EXPECT_TRUE(other->try_acquire_for(ttl + margin)) << "declared expiring, but the dead holder's lock stayed held";
  } else {
    std::this_thread::sleep_for(2 * ttl);
    EXPECT_FALSE(other->try_acquire()) << "not declared expiring, but the dead holder's lock freed itself";
  }
}

TEST_P(Lock, ExpiryWithoutRenewal) {
  const auto name = dlock::testing::unique_name("no-renewal");
  const auto ttl = 600ms;
  auto mine = make(name, options(ttl, false)), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  const bool kept_alive = hooks() && hooks()->validity_kept_alive;
  if (!has(capability::expiring) || held.valid_until() == clock::time_point::max() || kept_alive) {
    if (!has(capability::expiring)) {
      EXPECT_EQ(held.valid_until(), clock::time_point::max());
    }
    std::this_thread::sleep_for(2 * ttl);
    EXPECT_FALSE(theirs->try_acquire()) << "a grant without ttl expiry was taken from a live holder";
    EXPECT_FALSE(held.lost_token().stop_requested());
    return;
  }
  std::this_thread::sleep_until(held.valid_until());
  auto now_theirs = theirs->try_acquire_for(ttl + margin);
  EXPECT_TRUE(now_theirs) << "the unrenewed grant did not expire";
  const auto deadline = clock::now() + margin;
  while (!held.lost_token().stop_requested() && clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "validity ran out but lost did not fire";
}

TEST_P(Lock, RenewKeepsTheLockPastItsTtl) {
  const auto name = dlock::testing::unique_name("renew");
  const auto ttl = 600ms;
  auto mine = make(name, options(ttl, false)), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  if (!has(capability::renewable)) {
    try {
      held.renew(ttl);
      ADD_FAILURE() << "renew succeeded on a backend not declared renewable";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), errc::not_supported) << e.what();
    }
    return;
  }
  const auto end = clock::now() + 3 * ttl;
  while (clock::now() < end) {
    std::this_thread::sleep_for(ttl / 3);
    held.renew(ttl);
    EXPECT_FALSE(theirs->try_acquire()) << "another owner acquired a renewed lock";
  }
  EXPECT_TRUE(held.held());
}

TEST_P(Lock, WatchdogKeepsTheLockPastItsTtl) {
  if (!has(capability::renewable))
    GTEST_SKIP() << "not renewable: no watchdog runs (the renew test asserts not_supported)";
  const auto name = dlock::testing::unique_name("watchdog");
  // Renewals every 400 ms, each with 800 ms to spare: a starved machine (a sanitizer, three tests at
  // a time on two cores) delays one by a few hundred milliseconds, and this is not a timing test.
  const auto ttl = 1200ms;
  auto mine = make(name, options(ttl, true)), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(2 * ttl);
  EXPECT_FALSE(theirs->try_acquire()) << "the watchdog did not keep the lock";
  EXPECT_TRUE(held.held());
}

// A grant that waited longer than its ttl: the wait was not the holder's time. It is handed out
// with its validity ahead of it, and it excludes others like any grant. (A lock bound to a server
// session counted the validity from the start of the waiting statement: spent at the grant, it
// ran out before the session monitor's first check could move it, some ticks' worth of the time,
// and the lease was lost, its session ended, under a holder just granted it.)
TEST_P(Lock, AGrantAfterAWaitLongerThanItsTtlHasItsTtlAhead) {
  const auto name = dlock::testing::unique_name("long-wait");
  // A second: the checks below leave the watchdog and the grant's delivery half of it to spare,
  // which a starved machine (a sanitizer, three tests at a time on two cores) can use up at 600 ms.
  const auto ttl = 1000ms;
  auto theirs = make(name, options(ttl, true)), third = make(name), mine = make(name, options(ttl, true));
  // The holder is another process, so that the wait happens on the server (one backend object may
  // queue its own waiters locally), and is killed; a process-scoped lock's holder is in here.
  std::optional<dlock::testing::child_process> holder;
  lease held;
  if (backend_->scope() == lock_scope::process) {
    held = mine->try_acquire();
    ASSERT_TRUE(held);
  } else {
    holder.emplace(std::vector<std::string>{DLOCK_CONFORMANCE_WORKER, "hold", uri_, name, std::to_string(ttl.count())});
    const auto line = holder->read_line(15s);
    ASSERT_TRUE(line && line->starts_with("acquired")) << "the holder process did not acquire";
  }
  auto waiting = std::async(std::launch::async, [&] { return theirs->try_acquire_for(3 * ttl + margin); });
  std::this_thread::sleep_for(3 * ttl / 2);  // the property needs a wait longer than the ttl
  if (holder) {
    holder->kill_hard();
    holder->wait(10s);
  } else {
    held.release();
  }
  auto granted = waiting.get();
  const auto at = clock::now();
  ASSERT_TRUE(granted) << "the waiter was not granted after the holder went";
  if (granted.valid_until() != clock::time_point::max()) {
    EXPECT_GE(granted.valid_until() - at, ttl / 2) << "the grant came with its validity spent on the wait";
  }
  std::this_thread::sleep_for(ttl / 2);  // past the session checks' first ticks
  EXPECT_TRUE(granted.held());
  EXPECT_FALSE(granted.lost_token().stop_requested()) << "a grant after a long wait was reported lost";
  EXPECT_FALSE(third->try_acquire()) << "acquired while held";
  std::error_code ec;
  granted.release(ec);
  EXPECT_FALSE(ec) << ec.message();
}

}  // namespace dlock::conformance
