// Real worker processes contending for one name, then the checker on their history. memory://
// locks exclude only within a process, so separate processes MUST overlap: the test that the
// checker sees overlaps when they happen. file:// (host scope) and redis:// must show none.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "dlock_compare/checker.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_test/support.hpp"
#include "temp_dir.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

// Small enough to keep each test under ~5 s, long enough for dozens of handoffs.
constexpr int clients = 3;
constexpr std::chrono::milliseconds run_duration = 1500ms;
constexpr std::chrono::milliseconds acquire_timeout = 1000ms;

// Each client's critical section (same for all by default).
using work_plan = std::array<std::chrono::milliseconds, clients>;
constexpr work_plan same_work{10ms, 10ms, 10ms};

// Starts the workers (all begin at one shared instant), waits for them, and checks the history.
check_result run_and_check(const std::string& uri, const work_plan& work = same_work) {
  temp_dir dir;
  const auto history = dir.path() / "history";
  const auto name = dlock::testing::unique_name("compare");
  // Far enough ahead that every process is up and has opened its backend before the start.
  const auto start = shared_clock::now() + 500ms;
  std::vector<std::unique_ptr<dlock::testing::child_process>> workers;
  for (int client = 1; client <= clients; ++client)
    workers.push_back(std::make_unique<dlock::testing::child_process>(std::vector<std::string>{
        DLOCK_COMPARE_WORKER, "--uri", uri, "--name", name, "--history", history.string(), "--client",
        std::to_string(client), "--start-at-ns", std::to_string(start.time_since_epoch().count()), "--duration",
        std::to_string(run_duration.count()) + "ms", "--work", std::to_string(work[client - 1].count()) + "ms",
        "--acquire-timeout", std::to_string(acquire_timeout.count()) + "ms"}));
  // Generous: the last acquire may start just before the end and wait its whole timeout.
  const auto allowed = 500ms + run_duration + acquire_timeout + std::ranges::max(work) + 20s;
  for (auto& w : workers) EXPECT_EQ(w->wait(allowed), std::optional<int>(0)) << "worker " << w->pid();
  const auto events = read_history(history);
  auto result = check(std::span<const event>(events));
  std::cout << "check: " << to_json(result, 3) << '\n';
  return result;
}

std::string required_env(const char* variable, const char* servers) {
  const char* v = std::getenv(variable);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << variable << " is not set: start the servers with compose/native/dlock-servers up " << servers;
    return {};
  }
  return v;
}

TEST(CompareEndToEnd, ProcessScopedMemoryLocksOverlapAcrossProcessesAndTheCheckerSeesIt) {
  const auto r = run_and_check("memory://", {5ms, 15ms, 30ms});
  EXPECT_EQ(r.totals.clients, 3u);
  EXPECT_GT(r.overlap_count(), 0u) << "three processes each holding their own memory:// lock must overlap";
  EXPECT_EQ(r.unnotified_losses, r.overlap_count()) << "memory:// never tells a holder another process got in";
  // Each process counts its own tokens, and the client with the shortest work counts fastest:
  // the slower clients' writes carry smaller tokens than ones already written. The fence,
  // judging in the same order, refuses exactly those.
  EXPECT_GT(r.stale_writes_accepted_by_naive, 0u);
  EXPECT_EQ(r.stale_writes_refused_by_fenced, r.stale_writes_accepted_by_naive);
  EXPECT_EQ(r.writes_refused_by_fenced, r.stale_writes_accepted_by_naive);
  EXPECT_EQ(r.totals.release_not_owner, 0u);
}

// The properties of a lock that excludes every client of the run.
void expect_exclusive(const check_result& r) {
  EXPECT_EQ(r.totals.clients, static_cast<std::uint64_t>(clients));
  EXPECT_GE(r.totals.grants, static_cast<std::uint64_t>(clients)) << "too few grants to say anything";
  EXPECT_EQ(r.totals.writes, r.totals.grants);
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.unnotified_losses, 0u);
  EXPECT_EQ(r.totals.release_not_owner, 0u);
  EXPECT_EQ(r.totals.release_errors, 0u);
  EXPECT_EQ(r.totals.acquire_errors, 0u);
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 0u);
  EXPECT_EQ(r.writes_refused_by_fenced, 0u);
}

TEST(CompareEndToEnd, HostScopedFileLocksNeverOverlap) {
  temp_dir locks;
  const auto r = run_and_check("file://" + locks.path().string() + "?poll=1ms..20ms");
  expect_exclusive(r);
  EXPECT_EQ(r.totals.writes_without_token, 0u) << "file:// declares fencing";
}

TEST(CompareEndToEnd, RedisLocksNeverOverlap) {
  const auto uri = required_env("DLOCK_REDIS_URI", "redis");
  ASSERT_FALSE(uri.empty());
  // wait_after_restart=false: this test is about exclusion on a healthy server, and must not
  // wait out a ttl because the launcher started (or another test restarted) the server just now.
  expect_exclusive(run_and_check(dlock::testing::with_query(uri, "poll=1ms..20ms&wait_after_restart=false")));
}

}  // namespace
}  // namespace dlock::compare::testing
