// The verdicts of dlock compare's cells, judged on recorded inputs: hand-made histories read by
// the real checker, in cells of the faults they would come from, each verdict shown given and
// withheld. The runs they stand for are described above each test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dlock_compare/checker.hpp"
#include "dlock_compare/verdict.hpp"
#include "synthetic_history.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds ttl = 1s;

matrix_cell cell_of(fault f, const synthetic_history& h) {
  matrix_cell c;
  c.backend = "x";
  c.scenario = f;
  c.text = "observed";
  c.result.emplace();
  c.result->check = check(std::span<const event>(h.events()));
  return c;
}

// Kleppmann's pause (pause-before-write), as on an expiring server lock (ttl 1 s): client 1, granted token 1 at 0,
// stops before its write; its key expires, client 2 is granted token 2 at 1000 and writes, client 3
// token 3 at 2400; client 1 resumes at 2500 and writes with its token 1 while client 3 writes.
// Recorded with tokens: the naive resource took client 1's stale write, the fenced one refused it.
synthetic_history kleppmann(bool tokens, fence_verdict for_the_stale_write) {
  synthetic_history h;
  auto first = section_of(1).granted(0).write(2500, 2700).lost(2550).released(2701, event_kind::release_not_owner);
  auto second = section_of(2).started(10).granted(1000).write(1001, 1201).released(1202);
  auto third = section_of(3).started(20).granted(2400).write(2401, 2601).released(2602);
  if (tokens) {
    first.token(1).verdict(for_the_stale_write);
    second.token(2);
    third.token(3);
  } else {
    for (auto* s : {&first, &second, &third}) s->verdict(fence_verdict::no_token);
  }
  h.add(first).add(second).add(third);
  return h;
}

TEST(Verdict, PauseBeforeWriteOneAcceptedOneRefusedIsSafeWithFencingForAFencedBackend) {
  auto cell = cell_of(fault::pause_before_write, kleppmann(true, fence_verdict::refused));
  cell.result->victim = 1;
  cell.result->recovered_after = 1000ms;
  const auto& c = cell.result->check;
  ASSERT_EQ(c.stale_writes_accepted_by_naive, 1u) << "the recorded input: 1 accepted by the naive resource";
  ASSERT_EQ(c.stale_writes_refused_by_fenced, 1u) << "... and 1 refused by the fenced one";
  ASSERT_GT(c.overlap_count(), 0u);
  const auto v = verdict_of(cell, ttl);
  EXPECT_EQ(v.kind, verdict_kind::safe_with_fencing);
  EXPECT_EQ(v.text(), "safe with fencing");
  EXPECT_EQ(v.short_text(), "fenced");
}

TEST(Verdict, PauseBeforeWriteIsUnsafeForAnUnfencedBackend) {
  // The same run with no tokens (a backend without fencing): the fence cannot refuse anything.
  auto cell = cell_of(fault::pause_before_write, kleppmann(false, fence_verdict::no_token));
  cell.result->victim = 1;
  cell.result->recovered_after = 1000ms;
  ASSERT_GT(cell.result->check.overlap_count(), 0u);
  ASSERT_EQ(cell.result->check.stale_writes_accepted_by_naive, 0u) << "no token, nothing counted stale";
  const auto v = verdict_of(cell, ttl);
  EXPECT_EQ(v.kind, verdict_kind::unsafe);
  EXPECT_EQ(v.text(), "unsafe");
  EXPECT_EQ(v.short_text(), "UNSAFE");
}

TEST(Verdict, AStaleWriteTheFenceLetThroughIsUnsafe) {
  auto cell = cell_of(fault::pause_before_write, kleppmann(true, fence_verdict::accepted));
  cell.result->victim = 1;
  ASSERT_EQ(cell.result->check.stale_writes_accepted_by_naive, 1u);
  ASSERT_EQ(cell.result->check.stale_writes_refused_by_fenced, 0u);
  EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::unsafe);
}

TEST(Verdict, AnOverlapOfTwoWritesWithTheSameTokenIsUnsafe) {
  // Two processes each counting their own tokens (a process-scope lock across processes): both write token 1.
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(5, 50).released(51));
  h.add(section_of(2).token(1).granted(1).write(6, 40).released(41));
  EXPECT_EQ(verdict_of(cell_of(fault::healthy, h), ttl).kind, verdict_kind::unsafe);
}

TEST(Verdict, OverlapsWithDifferentTokensAndNoStaleWriteAreSafeWithFencing) {
  // holder-pause on an expiring lock: the holder stopped inside its write (its token already
  // accepted) overlaps its successor, whose larger token the fence takes; the holder, told after
  // the successor's grant (unnotified), writes on: a resource checking tokens refuses the rest.
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(5, 2700).lost(2600).released(2701, event_kind::release_not_owner));
  h.add(section_of(2).token(2).started(10).granted(1000).write(1001, 1201).released(1202));
  auto cell = cell_of(fault::holder_pause, h);
  cell.result->victim = 1;
  cell.result->recovered_after = 995ms;
  ASSERT_EQ(cell.result->check.unnotified_losses, 1u);
  EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe_with_fencing);
}

// A lock that stays with its paused holder (a host-wide file lock, a session-bound lock): no overlap, and the
// next grant only when the holder resumes, 2.5 ttls later.
synthetic_history waited_for_the_paused_holder() {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(5, 2700).released(2701));
  h.add(section_of(2).token(2).started(10).granted(2702).write(2703, 2903).released(2904));
  return h;
}

TEST(Verdict, ALockThatStaysWithItsPausedHolderIsUnavailableForThePause) {
  for (const auto f : {fault::holder_pause, fault::pause_before_write}) {
    auto cell = cell_of(f, waited_for_the_paused_holder());
    cell.result->victim = 1;
    cell.result->paused_for = 2500ms;
    cell.result->recovered_after = 2520ms;  // granted only once the holder was resumed
    const auto v = verdict_of(cell, ttl);
    EXPECT_EQ(v.kind, verdict_kind::unavailable) << to_string(f);
    EXPECT_EQ(v.text(), "unavailable for 2.52s");
    EXPECT_EQ(v.short_text(), "gap2.5s");
    // Granted during the pause (its grant expired): not kept by the stopped holder, and no overlap
    // here (the successor's write came after the holder's): safe.
    cell.result->recovered_after = 2400ms;
    EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe) << to_string(f);
    cell.result->recovered_after = 980ms;
    EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe) << to_string(f);
  }
}

TEST(Verdict, ALockThatStaysWithItsCutOffHolderUntilTheLinkIsBackIsUnavailable) {
  // partition on a session-bound lock: the partitioned session keeps it; the next grant to
  // another client comes 3.08 s after the cut, the link down for 2.51 s.
  auto cell = cell_of(fault::partition, waited_for_the_paused_holder());
  cell.result->victim = 1;
  cell.result->paused_for = 2510ms;
  cell.result->recovered_after = 3080ms;
  EXPECT_EQ(verdict_of(cell, ttl).text(), "unavailable for 3.08s");
  cell.result->recovered_after = 1610ms;  // an expiring lock, let go a ttl after its last renewal
  EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe);
}

TEST(Verdict, AKilledHolderWhoseLockNeverFreesIsNeverGrantedAgain) {
  // holder-kill on a lock that does not expire, kill-mid-acquire between SETNX and EXPIRE: the
  // others wait to the end of the run.
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(5));  // killed at 100 while writing
  h.add(event_kind::acquire_started, 2, 0, 10).add(event_kind::acquire_timed_out, 2, 0, 3010);
  for (const auto f : {fault::holder_kill, fault::kill_mid_acquire}) {
    auto cell = cell_of(f, h);
    cell.result->victim = 1;
    cell.result->watched_after_fault = 4990ms;
    const auto v = verdict_of(cell, ttl);
    EXPECT_EQ(v.kind, verdict_kind::unavailable) << to_string(f);
    EXPECT_TRUE(v.never_granted);
    EXPECT_EQ(v.text(), "unavailable: never granted again (4.99s watched)");
    EXPECT_EQ(v.short_text(), "never");
    cell.result->recovered_after = 1020ms;  // an expiring lock's recovery
    EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe) << to_string(f);
    cell.result->recovered_after = 3000ms;
    EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe) << "exactly 3 ttls is not over 3 ttls";
    cell.result->recovered_after = 3100ms;
    EXPECT_EQ(verdict_of(cell, ttl).text(), "unavailable for 3.10s") << to_string(f);
  }
}

TEST(Verdict, ARestartIsJudgedFromTheServersReturn) {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(5, 100).released(101));
  h.add(section_of(2).token(2).granted(7000).write(7001, 7100).released(7101));
  auto cell = cell_of(fault::server_restart, h);
  cell.result->server_down_for = 880ms;
  cell.result->recovered_after = 5980ms;  // a restart guard of several seconds
  EXPECT_EQ(verdict_of(cell, ttl).text(), "unavailable for 5.98s");
  cell.result->recovered_after = 2010ms;  // a restart guard of a ttl and up to a second
  EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe);
  cell.result->recovered_after.reset();
  cell.result->watched_after_fault = 7000ms;
  EXPECT_EQ(verdict_of(cell, ttl).text(), "unavailable: never granted again (7.00s watched)");
}

TEST(Verdict, AHolderThatKeepsItsLockIsNotUnavailability) {
  // connection-kill on a key-based lock: the holder reconnects and still holds its key; the next
  // grant comes when its 2-ttl write ends, 1.96 s after the kill: the holders' view sees no gap.
  synthetic_history kept;
  kept.add(section_of(1).token(1).granted(0).write(5, 2000).released(2001));
  kept.add(section_of(2).token(2).started(10).granted(2003).write(2004, 2100).released(2101));
  auto cell = cell_of(fault::connection_kill, kept);
  cell.result->victim = 1;
  cell.result->recovered_after = 1960ms;
  EXPECT_EQ(verdict_of(cell, ttl).kind, verdict_kind::safe);

  // A holder told at 300 that its lock is gone, the next grant at 3600: 3.3 s with a waiter and no holder.
  synthetic_history lost;
  lost.add(section_of(1).token(1).granted(0).write(5, 200).lost(300).released(301, event_kind::release_not_owner));
  lost.add(section_of(2).token(2).started(10).granted(3600).write(3601, 3700).released(3701));
  auto told = cell_of(fault::connection_kill, lost);
  told.result->victim = 1;
  EXPECT_EQ(verdict_of(told, ttl).text(), "unavailable for 3.30s");
}

TEST(Verdict, AQuorumLostIsUnavailableUntilTheNextGrantAndAMinorityLostIsSafe) {
  // masters-majority-lost: the holder's renewals fail and it is told; while no majority answers an
  // acquire fails at once and its client sleeps, so the checker's waits have holes: the verdict
  // counts from the stop to the next grant.
  synthetic_history h;
  h.add(section_of(1)
            .granted(0)
            .write(5, 2000)
            .lost(700)
            .released(2001, event_kind::release_failed)
            .verdict(fence_verdict::no_token));
  h.add(event_kind::acquire_started, 2, 0, 800).add(event_kind::acquire_failed, 2, 0, 810);
  h.add(section_of(2, 1).started(2810).granted(3300).write(3301, 3400).released(3401).verdict(fence_verdict::no_token));
  auto majority = cell_of(fault::masters_majority_lost, h);
  majority.result->victim = 1;
  majority.result->quorum.emplace();
  majority.result->quorum->holder = 1;
  majority.result->quorum->holder_told_after = 700ms;
  majority.result->quorum->next_grant_after_fault = 2360ms;
  majority.result->quorum->grants_while_down = 0;
  EXPECT_EQ(verdict_of(majority, ttl).text(), "unavailable for 2.36s") << "nothing granted while no majority was up";
  majority.result->quorum->grants_while_down = 1;
  EXPECT_EQ(verdict_of(majority, ttl).kind, verdict_kind::safe) << "granted while the majority was down, no overlap";

  // masters-minority-lost: the holder kept its lock; the next grant is its release.
  synthetic_history m;
  m.add(section_of(1).granted(0).write(5, 2000).released(2001).verdict(fence_verdict::no_token));
  m.add(section_of(2).started(10).granted(2002).write(2003, 2100).released(2101).verdict(fence_verdict::no_token));
  auto minority = cell_of(fault::masters_minority_lost, m);
  minority.result->victim = 1;
  minority.result->quorum.emplace();
  minority.result->quorum->holder = 1;
  minority.result->quorum->holder_kept_lock = true;
  minority.result->quorum->next_grant_after_fault = 2002ms;
  EXPECT_EQ(verdict_of(minority, ttl).kind, verdict_kind::safe);
}

TEST(Verdict, AFaultNotInjectedIsNotRunUnlessTheRunWasUnsafeAnyway) {
  synthetic_history quiet;
  quiet.add(section_of(1).token(1).granted(0).write(5, 15).released(16));
  auto cell = cell_of(fault::holder_kill, quiet);
  cell.result->fault_not_injected = "no holder was caught inside its write";
  const auto v = verdict_of(cell, ttl);
  EXPECT_EQ(v.kind, verdict_kind::not_run);
  EXPECT_TRUE(v.fault_not_injected);
  EXPECT_EQ(v.text(), "not run: fault not injected: no holder was caught inside its write");
  EXPECT_EQ(v.short_text(), "?");

  auto overlapping = cell_of(fault::holder_kill, kleppmann(false, fence_verdict::no_token));
  overlapping.result->fault_not_injected = "no holder was caught inside its write";
  EXPECT_EQ(verdict_of(overlapping, ttl).kind, verdict_kind::unsafe) << "what the run showed stands";
}

TEST(Verdict, NoGrantInTheWholeRunIsUnavailable) {
  synthetic_history h;
  h.add(event_kind::acquire_started, 1, 0, 0).add(event_kind::acquire_failed, 1, 0, 5);
  const auto v = verdict_of(cell_of(fault::healthy, h), ttl);
  EXPECT_EQ(v.kind, verdict_kind::unavailable);
  EXPECT_EQ(v.text(), "unavailable: no grant in the run");
  EXPECT_EQ(v.short_text(), "never");
}

TEST(Verdict, ACellThatDidNotRunSaysWhy) {
  matrix_cell c;
  c.backend = "x";
  c.text = "not run: DLOCK_X_URI unset";
  const auto v = verdict_of(c, ttl);
  EXPECT_EQ(v.kind, verdict_kind::not_run);
  EXPECT_EQ(v.not_run_because, "DLOCK_X_URI unset");
  EXPECT_EQ(v.text(), "not run: DLOCK_X_URI unset");
  EXPECT_EQ(v.short_text(), "-");
}

TEST(Verdict, ShortTextsFitSevenCharacters) {
  cell_verdict v;
  v.kind = verdict_kind::unavailable;
  for (const std::chrono::milliseconds d : {100ms, 2500ms, 9949ms, 9990ms, 12000ms, 123456ms, 5000000ms}) {
    v.unavailable_for = d;
    EXPECT_LE(v.short_text().size(), 7u) << v.short_text();
  }
  v.unavailable_for = 9990ms;
  EXPECT_EQ(v.short_text(), "gap10s") << "not gap10.0s";
}

TEST(RowVerdict, TheWorstCellWithTheCounts) {
  matrix m;
  m.ttl = ttl;
  m.backends = {"x"};
  m.faults = {fault::healthy, fault::holder_kill, fault::holder_pause, fault::pause_before_write,
              fault::server_restart};
  synthetic_history ok;
  ok.add(section_of(1).token(1).granted(0).write(5, 15).released(16));
  auto healthy = cell_of(fault::healthy, ok);
  auto killed = cell_of(fault::holder_kill, ok);
  killed.result->victim = 1;
  killed.result->recovered_after = 990ms;
  auto paused = cell_of(fault::holder_pause, waited_for_the_paused_holder());
  paused.result->victim = 1;
  paused.result->recovered_after = 2500ms;
  auto fenced = cell_of(fault::pause_before_write, kleppmann(true, fence_verdict::refused));
  matrix_cell not_run;
  not_run.backend = "x";
  not_run.scenario = fault::server_restart;
  not_run.text = "not run: no single server to restart";
  m.cells = {healthy, killed, paused, fenced, not_run};
  const auto row = row_verdict_of(m, "x");
  EXPECT_EQ(row.worst, verdict_kind::safe_with_fencing);
  EXPECT_EQ(row.count(verdict_kind::safe), 2u);
  EXPECT_EQ(row.count(verdict_kind::unavailable), 1u);
  EXPECT_EQ(row.count(verdict_kind::safe_with_fencing), 1u);
  EXPECT_EQ(row.count(verdict_kind::not_run), 1u);
  EXPECT_EQ(row.text(), "safe with fencing (2 safe, 1 unavailable, 1 safe with fencing, 1 not run)");
  EXPECT_EQ(row.short_text(), "fenced");

  m.cells[0] = cell_of(fault::healthy, kleppmann(false, fence_verdict::no_token));
  EXPECT_EQ(row_verdict_of(m, "x").worst, verdict_kind::unsafe) << "one unsafe cell makes the row unsafe";

  m.cells = {not_run};
  m.faults = {fault::server_restart};
  EXPECT_EQ(row_verdict_of(m, "x").text(), "not run");
  EXPECT_EQ(row_verdict_of(m, "x").short_text(), "-");
}

}  // namespace
}  // namespace dlock::compare::testing
