// The checker on hand-made histories: each property it measures is shown both counted where it
// is there and not counted where it is not.
#include <gtest/gtest.h>

#include "dlock_compare/checker.hpp"
#include "synthetic_history.hpp"

namespace dlock::compare::testing {
namespace {

check_result check_history(const synthetic_history& h) { return check(std::span<const event>(h.events())); }

// The checker on a history of these sections.
check_result check_sections(std::initializer_list<section_of> sections) {
  synthetic_history h;
  for (const auto& s : sections) h.add(s);
  return check_history(h);
}

TEST(Checker, IntersectingWritesOfTwoClientsAreAnOverlap) {
  const auto r = check_sections({section_of(1).token(1).granted(5).write(10, 50).released(51),
                                 section_of(2).token(1).granted(35).write(40, 80).released(81)});
  ASSERT_EQ(r.overlap_count(), 1u);
  EXPECT_EQ(r.overlaps[0].older, (section_id{1, 0}));
  EXPECT_EQ(r.overlaps[0].newer, (section_id{2, 0}));
  EXPECT_EQ(r.overlaps[0].length, ms(10));
  EXPECT_EQ(r.unnotified_losses, 1u) << "client 1 was never told it lost the lock";
}

TEST(Checker, AnOverlapIsFencedOnlyWhenBothWritesCarryDifferentTokens) {
  // Client 1 writes with token 1 from 10 to 50 ms; client 2's write (40 to 80 ms) meets it.
  const auto checked_beside_token_1 = [](const section_of& client_2) {
    return check_sections({section_of(1).token(1).granted(5).write(10, 50).released(51), client_2});
  };
  // Different tokens: a fenced resource can order the two writers (and refuse the older's later writes).
  const auto f = checked_beside_token_1(section_of(2).token(2).granted(35).write(40, 80).released(81));
  ASSERT_EQ(f.overlap_count(), 1u);
  EXPECT_TRUE(f.overlaps[0].fenced);
  EXPECT_EQ(f.unfenced_overlaps, 0u);

  // The same token twice (two process-local counters), or a write without one: nothing can tell
  // the writers apart.
  const auto s = checked_beside_token_1(section_of(2).token(1).granted(35).write(40, 80).released(81));
  ASSERT_EQ(s.overlap_count(), 1u);
  EXPECT_FALSE(s.overlaps[0].fenced);
  EXPECT_EQ(s.unfenced_overlaps, 1u);

  const auto t =
      checked_beside_token_1(section_of(2).granted(35).write(40, 80).released(81).verdict(fence_verdict::no_token));
  ASSERT_EQ(t.overlap_count(), 1u);
  EXPECT_FALSE(t.overlaps[0].fenced);
  EXPECT_EQ(t.unfenced_overlaps, 1u);
}

TEST(Checker, WritesOneAfterTheOtherAreNoOverlap) {
  const auto r = check_sections({section_of(1).token(1).granted(5).write(10, 30).released(31),
                                 section_of(2).token(2).granted(32).write(33, 60).released(61)});
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.unnotified_losses, 0u);
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 0u);
}

TEST(Checker, EveryIntersectingPairIsCountedAndOnlyThose) {
  // A long write spans two short ones that do not meet each other: two overlaps, not three.
  const auto r = check_sections({section_of(1).granted(0).write(0, 100).released(101),
                                 section_of(2).granted(9).write(10, 20).released(21),
                                 section_of(3).granted(29).write(30, 40).released(41)});
  ASSERT_EQ(r.overlap_count(), 2u);
  for (const auto& o : r.overlaps) EXPECT_EQ(o.older, (section_id{1, 0}));
}

TEST(Checker, ASmallerTokenAfterALargerOneIsAStaleWrite) {
  const auto r =
      check_sections({section_of(1).token(5).granted(0).write(10, 15).released(16),
                      section_of(2).token(3).granted(17).write(20, 25).released(26).verdict(fence_verdict::refused),
                      section_of(1, 1).token(6).granted(27).write(30, 35).released(36)});
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 1u);
  EXPECT_EQ(r.stale_writes_refused_by_fenced, 1u);
  EXPECT_EQ(r.writes_refused_by_fenced, 1u);
}

TEST(Checker, AStaleWriteTheFenceLetThroughIsNotCountedAsRefused) {
  const auto r =
      check_sections({section_of(1).token(5).granted(0).write(10, 15).released(16),
                      section_of(2).token(3).granted(17).write(20, 25).released(26).verdict(fence_verdict::accepted)});
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 1u);
  EXPECT_EQ(r.stale_writes_refused_by_fenced, 0u) << "the checker must not assume the fence worked";
}

TEST(Checker, AnEqualTokenIsNotStale) {
  synthetic_history h;
  h.add(section_of(1).token(5).granted(0).write(10, 15).released(16));
  h.add(section_of(2).token(5).granted(17).write(20, 25).released(26));
  EXPECT_EQ(check_history(h).stale_writes_accepted_by_naive, 0u);
}

TEST(Checker, AnOverlapWhoseOlderHolderWasToldBeforeTheNewerGrantIsNotAnUnnotifiedLoss) {
  const auto r = check_sections(
      {section_of(1).token(1).granted(0).write(5, 50).lost(30).released(51, event_kind::release_not_owner),
       section_of(2).token(2).granted(40).write(41, 60).released(61)});
  ASSERT_EQ(r.overlap_count(), 1u);
  EXPECT_TRUE(r.overlaps[0].notified_before_newer_grant);
  EXPECT_EQ(r.unnotified_losses, 0u);
  EXPECT_EQ(r.totals.release_not_owner, 1u);
  EXPECT_EQ(r.totals.lost_notifications, 1u);
}

TEST(Checker, ALostNotificationAfterTheNewerGrantIsAnUnnotifiedLoss) {
  const auto r = check_sections({section_of(1).token(1).granted(0).write(5, 50).lost(45).released(51),
                                 section_of(2).token(2).granted(40).write(41, 60).released(61)});
  ASSERT_EQ(r.overlap_count(), 1u);
  EXPECT_EQ(r.unnotified_losses, 1u);
}

TEST(Checker, UnavailabilityIsTheLongestStretchWithAWaiterAndNoHolder) {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(1, 99).released(100));
  h.add(section_of(2).token(2).started(50).granted(300).write(301, 310).released(311));
  // Nobody waits between 311 and 1000: no holder then is not unavailability.
  h.add(section_of(1, 1).token(3).started(1000).granted(1020).write(1021, 1030).released(1031));
  const auto r = check_history(h);
  EXPECT_EQ(r.longest_unavailable, ms(200));
  ASSERT_TRUE(r.longest_unavailable_from.has_value());
  EXPECT_EQ(*r.longest_unavailable_from, at_ms(100));
  EXPECT_EQ(r.longest_wait_for_grant, ms(250));
}

TEST(Checker, ALostNotificationEndsTheHoldForUnavailability) {
  // Client 1 learns at 40 that its grant is gone; client 2 waits until 140: 100 ms unavailable.
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(1, 20).lost(40).released(200, event_kind::release_not_owner));
  h.add(section_of(2).token(2).started(10).granted(140).write(141, 150).released(151));
  EXPECT_EQ(check_history(h).longest_unavailable, ms(100));
}

TEST(Checker, CountsGrantsTimeoutsErrorsAndReleaseOutcomes) {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(1, 10).released(11, event_kind::release_not_owner));
  h.add(section_of(1, 1).token(2).granted(20).write(21, 30).released(31, event_kind::release_failed));
  h.add(event_kind::acquire_started, 2, 0, 0).add(event_kind::acquire_timed_out, 2, 0, 40);
  h.add(event_kind::acquire_started, 2, 1, 41).add(event_kind::acquire_failed, 2, 1, 50);
  const auto r = check_history(h);
  EXPECT_EQ(r.totals.clients, 2u);
  EXPECT_EQ(r.totals.acquires, 4u);
  EXPECT_EQ(r.totals.grants, 2u);
  EXPECT_EQ(r.totals.writes, 2u);
  EXPECT_EQ(r.totals.acquire_timeouts, 1u);
  EXPECT_EQ(r.totals.acquire_errors, 1u);
  EXPECT_EQ(r.totals.release_not_owner, 1u);
  EXPECT_EQ(r.totals.release_errors, 1u);
  EXPECT_EQ(r.totals.releases, 0u);
  EXPECT_EQ(r.totals.writes_begun_not_held, 0u);
  EXPECT_EQ(r.totals.writes_ended_not_held, 0u);
}

TEST(Checker, CountsWritesTheHolderCouldKnowWereUnprotected) {
  const auto r = check_sections(
      {section_of(1).token(1).granted(0).write(1, 10).held(true, false).released(11, event_kind::release_not_owner),
       section_of(1, 1).token(2).granted(20).write(21, 30).held(false, false).released(31)});
  EXPECT_EQ(r.totals.writes_begun_not_held, 1u);
  EXPECT_EQ(r.totals.writes_ended_not_held, 2u);
}

TEST(Checker, AWriteCutShortByItsProcessDeathEndsAtItsLastEvent) {
  // Client 1 was killed after write_begin: its write cannot be said to reach client 2's.
  const auto r = check_sections({section_of(1).token(1).granted(0).write(10),
                                 section_of(2).token(2).started(5).granted(500).write(501, 510).released(511)});
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.totals.writes_unfinished, 1u);
  EXPECT_EQ(r.longest_unavailable, ms(490)) << "the dead holder stopped holding at its last event";
}

TEST(Checker, TheHolderAtTheEndIsTheClientGrantedAndNotYetReleased) {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(1, 10).released(11));
  h.add(section_of(2).token(2).granted(12).write(13));           // still writing
  h.add(section_of(3).token(3).granted(5).write(6, 7).lost(8));  // told it lost the grant
  h.add(event_kind::acquire_started, 1, 1, 20);                  // waiting
  EXPECT_EQ(holders_at_end(h.events()), std::vector<std::uint32_t>{2});
}

TEST(Checker, TheTimeToRecoverRunsFromTheFaultToTheNextGrant) {
  synthetic_history h;
  h.add(section_of(1).token(1).granted(0).write(1));  // killed at 50 while writing
  h.add(section_of(2).token(2).started(10).granted(180).write(181, 190).released(191));
  h.add(section_of(3).token(3).started(20).granted(200).write(201, 210).released(211));
  const auto sections = assemble_sections(h.events());
  EXPECT_EQ(time_to_recover(sections, at_ms(50)), std::optional<shared_clock::duration>(ms(130)));
  EXPECT_EQ(time_to_recover(sections, at_ms(500)), std::nullopt) << "no grant after the fault";
}

TEST(Checker, JsonCarriesEveryMeasure) {
  synthetic_history h;
  h.add(section_of(1).token(5).granted(0).write(10, 50).released(51));
  h.add(section_of(2).token(3).granted(30).write(40, 80).released(81).verdict(fence_verdict::refused));
  const auto json = to_json(check_history(h));
  for (const char* part :
       {"\"overlaps\": 1,", "\"stale_writes_accepted_by_naive\": 1,", "\"stale_writes_refused_by_fenced\": 1,",
        "\"unnotified_losses\": 1,", "\"grants\": 2,", "\"release_not_owner\": 0,", "\"length_ms\": 10.000",
        "\"longest_unavailable_ms\": ", "\"unfenced_overlaps\": 0,", "\"fenced\": true"})
    EXPECT_NE(json.find(part), std::string::npos) << "missing " << part << " in " << json;
}

}  // namespace
}  // namespace dlock::compare::testing
