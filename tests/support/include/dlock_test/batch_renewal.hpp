#pragma once
// The watchdog's batched renewal seen from the leases, for the backends that renew the leases
// falling due together in one call (one pipeline or one multi-key exchange, not a round trip
// each): every lease stays held, a lease removed from the server in the middle of a batch is still
// reported lost alone, and releases that meet a batch in flight are clean and never reported lost.
// The backend's test says how its server loses a lease and what it checks there besides.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/diagnostics.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace dlock::testing {

// How many leases are taken; the one in the middle is removed.
inline constexpr int batch_renewal_leases = 300;

struct batch_renewal_probe {
  // Deletes the name's lock on the server, out of band (what a restart without persistence leaves).
  std::function<void(const std::string& name)> remove;
  // Just before and just after the renewal rounds (the server's counters, say).
  std::function<void()> before_renewals = [] {};
  std::function<void()> after_renewals = [] {};
  // After the renewal rounds, for each name (`removed`: the one given to `remove`).
  std::function<void(const std::string& name, bool removed)> check_renewed = [](const std::string&, bool) {};
  // After each release.
  std::function<void(const std::string& name)> check_released = [](const std::string&) {};
};

// `b` was opened with ttl=1500ms and the watchdog on. Call it in ASSERT_NO_FATAL_FAILURE.
inline void expect_batched_renewal(dlock::backend& b, const batch_renewal_probe& probe) {
  constexpr int count = batch_renewal_leases;
  constexpr int removed = count / 2;
  std::vector<dlock::lease> leases;
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.push_back(unique_name("batch"));
    leases.push_back(b.make_lock(names.back())->try_acquire());
    ASSERT_TRUE(leases.back());
  }
  probe.remove(names[removed]);
  if (::testing::Test::HasFatalFailure()) return;
  probe.before_renewals();
  const auto before = dlock::current_watchdog_load();
  std::this_thread::sleep_for(std::chrono::milliseconds{2500});  // five renewal periods (ttl/3), and the ttl passed
  const auto after = dlock::current_watchdog_load();
  probe.after_renewals();
  const auto renewed = after.renewals - before.renewals, calls = after.renewal_calls - before.renewal_calls;
  EXPECT_GE(renewed, 3u * (count - 1)) << "leases renewed in 2.5 s";
  EXPECT_LE(calls * 10, renewed) << renewed << " renewals in " << calls << " calls: not batched";
  for (int i = 0; i < count; ++i) {
    probe.check_renewed(names[i], i == removed);
    if (i == removed) {
      EXPECT_TRUE(leases[i].lost_token().stop_requested()) << "the deleted lease was not reported lost";
      continue;
    }
    EXPECT_FALSE(leases[i].lost_token().stop_requested()) << names[i] << " lost";
    EXPECT_GT(leases[i].valid_until(), std::chrono::steady_clock::now()) << names[i];
  }
  // Released one every 5 ms, across three renewal rounds: a lease released while its batch is in
  // flight releases cleanly, and is never reported lost.
  for (int i = 0; i < count; ++i) {
    if (i == removed) continue;
    std::error_code ec;
    leases[i].release(ec);
    EXPECT_FALSE(ec) << names[i] << ": " << ec.message();
    probe.check_released(names[i]);
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  for (int i = 0; i < count; ++i) {
    if (i == removed) continue;
    EXPECT_FALSE(leases[i].lost_token().stop_requested()) << names[i] << " reported lost after its release";
  }
}

}  // namespace dlock::testing
