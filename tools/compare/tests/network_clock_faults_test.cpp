// The partition and clock faults (partition_fault.hpp, clock_faults.hpp) on real servers, with
// real namespaces and libfaketime: what each backend does, asserted as observed.
//   partition   redis, postgres+advisory (session-bound SQL) and zookeeper: the holder's link down
//               2.5 ttls. lost_notification: its lost_token fires before any other client's grant
//               (redis: its margin is the drift allowance, ttl/100 + 2 ms, too thin to assert on a
//               loaded machine: it must fire, at most 250 ms after that grant, and the margin is
//               printed); fencing: every stale write refused; no namespace of the run is left.
//   clock-step  redis+unsafe-getset (expiry in the value, GETSET takeover) overlaps when the other
//               clients' wall clocks step 60 s ahead; redis (server-side expiry) does not.
//   clock-slow  client 1's clocks at x0.25: on redis (validity and renewal on the client's clock)
//               its first write is overtaken while it still believes held(); postgres+advisory
//               (the server holds the lock for the session) lets no one in during its write. The
//               history's write lasts two real ttls although the worker slept half a ttl of its
//               own: the faked clocks did not reach the history's stamps.
// Each needs its server's variable (compose/native/dlock-servers up redis postgres zookeeper):
// unset, the test FAILS.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "dlock_compare/clock_faults.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/network_partition.hpp"
#include "dlock_compare/partition_fault.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_test/support.hpp"
#include "temp_dir.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

// The server's URI with `scheme` and a 1 s validity (the test fails when the variable is unset).
std::string uri_from(const char* variable, const std::string& scheme, const std::string& extra = "") {
  return dlock::testing::with_query(dlock::testing::with_scheme(dlock::testing::server_uri(variable), scheme),
                                    "ttl=1000ms" + extra);
}

struct run {
  scenario_result result;
  std::vector<section> sections;
};

run run_fault(fault f, const std::string& uri, const temp_dir& dir) {
  scenario_settings s;
  s.worker_executable = DLOCK_COMPARE_WORKER;
  s.uri = uri;
  s.name = dlock::testing::unique_name("compare-netclock");
  s.work_dir = dir.path();
  s.clients = 3;
  s.ttl = 1s;
  s.duration = 1s;
  run r{run_scenario(f, s), {}};
  r.sections = assemble_sections(read_history(dir.path() / "history"));
  std::cout << to_string(f) << " on " << uri.substr(0, uri.find("://")) << ": " << observation(f, r.result) << '\n';
  return r;
}

std::vector<std::string> namespaces_of_this_process() {
  std::vector<std::string> ours;
  const auto prefix = "dlkc-" + std::to_string(::getpid()) + "-";
  for (const auto& name : network_namespaces())
    if (name.rfind(prefix, 0) == 0) ours.push_back(name);
  return ours;
}

double ms(shared_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The partitioned holder: caught inside its write, its link cut; the section under way then.
void expect_partitioned_holder_told(const run& r, shared_clock::duration allowed_late) {
  ASSERT_TRUE(r.result.fault_not_injected.empty()) << r.result.fault_not_injected;
  ASSERT_TRUE(r.result.victim);
  ASSERT_GE(r.result.paused_for, 2500ms) << "the link was down less than 2.5 ttls";
  // The victim's section the cut struck: the last one granted before the cut, i.e. before the
  // recovery's reference instant; the partition's grant is the latest of its grants with a write
  // that began before any other client's next grant.
  const auto victim = *r.result.victim;
  std::optional<section> struck;
  for (const auto& s : r.sections)
    if (s.client == victim && s.granted && s.write_begin && s.lost) struck = s;
  ASSERT_TRUE(struck) << "the partitioned holder (client " << victim << ") was never told its lease was lost";
  std::optional<instant> next;
  for (const auto& s : r.sections)
    if (s.client != victim && s.granted && *s.granted > *struck->granted && (!next || *s.granted < *next))
      next = s.granted;
  ASSERT_TRUE(next) << "no other client was granted after the partitioned holder's grant";
  const auto margin = *next - *struck->lost;  // positive: told before the next grant
  std::cout << "  partitioned holder told " << ms(margin) << " ms before the next grant\n";
  EXPECT_GE(margin, -allowed_late) << "told " << ms(-margin) << " ms after another client was granted";
  // fencing: the fenced resource refused every stale write.
  EXPECT_EQ(r.result.check.stale_writes_refused_by_fenced, r.result.check.stale_writes_accepted_by_naive);
  EXPECT_EQ(r.result.check.totals.writes_without_token, 0u);
  EXPECT_TRUE(namespaces_of_this_process().empty()) << "a namespace of the run was left behind";
}

TEST(CompareNetworkFaults, PartitionedRedisHolderIsToldAtMostMomentsAfterTheNextGrant) {
  if (const auto why = network_partition::unavailable_because(); !why.empty()) FAIL() << why;
  const auto uri = uri_from("DLOCK_REDIS_URI", "redis");
  temp_dir dir;
  expect_partitioned_holder_told(run_fault(fault::partition, uri, dir), 250ms);
}

TEST(CompareNetworkFaults, PartitionedPostgresAdvisoryHolderIsToldBeforeTheNextGrant) {
  if (const auto why = network_partition::unavailable_because(); !why.empty()) FAIL() << why;
  const auto uri = uri_from("DLOCK_POSTGRES_URI", "postgres+advisory");
  temp_dir dir;
  const auto r = run_fault(fault::partition, uri, dir);
  expect_partitioned_holder_told(r, 0ms);
  // Session-bound: the server keeps the lock with the partitioned session; no one else is
  // granted before the link is back (safe, unavailable): no overlap.
  EXPECT_EQ(r.result.check.overlap_count(), 0u);
}

TEST(CompareNetworkFaults, PartitionedZooKeeperHolderIsToldBeforeTheNextGrant) {
  if (const auto why = network_partition::unavailable_because(); !why.empty()) FAIL() << why;
  const auto uri = uri_from("DLOCK_ZOOKEEPER_URI", "zookeeper", "&session_timeout=1000ms");
  temp_dir dir;
  expect_partitioned_holder_told(run_fault(fault::partition, uri, dir), 0ms);
}

// A run killed before its destructor ran leaves its namespaces; the next run's sweep deletes
// them (the pid in their name no longer exists) and leaves a live process' alone.
TEST(CompareNetworkFaults, SweepDeletesTheNamespacesOfADeadRunOnly) {
  if (const auto why = network_partition::unavailable_because(); !why.empty()) FAIL() << why;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const auto stale = "dlkc-" + std::to_string(dead) + "-0-hub";
  const auto live = "dlkc-" + std::to_string(::getpid()) + "-999-hub";
  ASSERT_EQ(std::system(("ip netns add " + stale + " && ip netns add " + live).c_str()), 0);
  network_partition::sweep_stale();
  const auto left = network_namespaces();
  const bool stale_left = std::ranges::find(left, stale) != left.end();
  const bool live_left = std::ranges::find(left, live) != left.end();
  std::system(("ip netns delete " + stale + " 2>/dev/null; ip netns delete " + live).c_str());
  EXPECT_FALSE(stale_left) << stale << " (of a dead process) was not swept";
  EXPECT_TRUE(live_left) << live << " (of this live process) was swept";
}

TEST(CompareClockFaults, WallClockStepLetsGetsetTakeOverButNotRedis) {
  if (libfaketime_path().empty()) FAIL() << "libfaketime is not installed (apt-get install faketime)";
  const auto unsafe = uri_from("DLOCK_REDIS_URI", "redis+unsafe-getset", "&unsafe=true");
  const auto safe = uri_from("DLOCK_REDIS_URI", "redis");
  temp_dir unsafe_dir, safe_dir;
  const auto getset = run_fault(fault::clock_step, unsafe, unsafe_dir);
  ASSERT_TRUE(getset.result.fault_not_injected.empty()) << getset.result.fault_not_injected;
  EXPECT_GT(getset.result.check.overlap_count(), 0u) << "the GETSET takeover of a client 60 s ahead was not seen";
  const auto redis = run_fault(fault::clock_step, safe, safe_dir);
  ASSERT_TRUE(redis.result.fault_not_injected.empty()) << redis.result.fault_not_injected;
  EXPECT_EQ(redis.result.check.overlap_count(), 0u) << "redis (server-side expiry) cared about a client's wall clock";
  EXPECT_GT(redis.result.check.totals.grants, 2u);
}

// Client 1's first section, which the clock-slow fault makes it win.
std::optional<section> slow_holders_first(const run& r) {
  for (const auto& s : r.sections)
    if (s.client == 1 && s.granted && s.write_end) return s;
  return std::nullopt;
}

TEST(CompareClockFaults, SlowClientClockOutlivesItsRedisLeaseButNotAPostgresSession) {
  if (libfaketime_path().empty()) FAIL() << "libfaketime is not installed (apt-get install faketime)";
  const auto redis_uri = uri_from("DLOCK_REDIS_URI", "redis");
  const auto postgres_uri = uri_from("DLOCK_POSTGRES_URI", "postgres+advisory");
  temp_dir redis_dir, postgres_dir;

  // Redis: validity and renewal run on the client's clock (renew every ttl/3 of it = 1.33 real
  // ttls): the server expires the key first, a client at real speed is granted during the slow
  // holder's write, and the slow holder's held() still says true at the write's end.
  const auto redis = run_fault(fault::clock_slow, redis_uri, redis_dir);
  const auto slow = slow_holders_first(redis);
  ASSERT_TRUE(slow) << "the slow client never finished a write";
  // The history is stamped on the real clock: half a ttl of the worker's clock lasted ~2 real ttls.
  EXPECT_GE(*slow->write_end - *slow->write_begin, 1500ms);
  EXPECT_TRUE(slow->held_at_end) << "redis: the slow holder learned in time (held() false)";
  bool overtaken = false;
  for (const auto& o : redis.result.check.overlaps)
    overtaken |= o.older.client == 1 && o.older.attempt == slow->attempt;
  EXPECT_TRUE(overtaken) << "redis: no client was granted during the slow holder's write";

  // postgres+advisory: the lock lives as long as the session; the client's clock does not matter:
  // no one else is granted between the slow client's grant and the end of its write. The release
  // follows the write at once, and a waiter may be granted as soon as the server has it, before
  // the holder stamps its release_done: the write's end, not release_done, closes the interval.
  const auto postgres = run_fault(fault::clock_slow, postgres_uri, postgres_dir);
  const auto slow_pg = slow_holders_first(postgres);
  ASSERT_TRUE(slow_pg) << "the slow client never finished a write";
  EXPECT_GE(*slow_pg->write_end - *slow_pg->write_begin, 1500ms) << "postgres+advisory: the clock was not slowed";
  for (const auto& s : postgres.sections) {
    const bool during =
        s.client != 1 && s.granted && *s.granted > *slow_pg->granted && *s.granted < *slow_pg->write_end;
    EXPECT_FALSE(during) << "postgres+advisory: client " << s.client << " was granted during the slow holder's write";
  }
  EXPECT_EQ(postgres.result.check.overlap_count(), 0u) << "postgres+advisory: two writes overlapped";
  for (const auto& o : postgres.result.check.overlaps)
    std::cout << "  overlap: client " << o.older.client << " attempt " << o.older.attempt << " and client "
              << o.newer.client << " attempt " << o.newer.attempt << " for " << ms(o.length) << " ms, older told "
              << (o.notified_before_newer_grant ? "before" : "after") << " the newer grant\n";
  for (const auto& s : postgres.sections)
    if (s.lost)
      std::cout << "  client " << s.client << " attempt " << s.attempt << " told lost " << ms(*s.lost - *s.granted)
                << " ms after its grant\n";
}

}  // namespace
}  // namespace dlock::compare::testing
