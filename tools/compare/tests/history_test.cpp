// The history file and the fenced resource: what several writers share.
#include <gtest/gtest.h>

#include <fstream>

#include "dlock_compare/fenced_resource.hpp"
#include "dlock_compare/history.hpp"
#include "temp_dir.hpp"

namespace dlock::compare::testing {
namespace {

TEST(History, EventsOfSeveralWritersReadBackWholeAndInOrder) {
  temp_dir dir;
  const auto file = dir.path() / "history";
  history_writer first(file);
  history_writer second(file);
  first.append_now(1, 0, event_kind::acquire_started);
  second.append_now(2, 0, event_kind::granted, 7);
  first.append_now(1, 0, event_kind::acquire_timed_out);
  const auto events = read_history(file);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].client, 1u);
  EXPECT_EQ(events[1].kind, event_kind::granted);
  EXPECT_EQ(events[1].fencing_token(), std::optional<std::uint64_t>(7));
  EXPECT_EQ(events[2].kind, event_kind::acquire_timed_out);
  EXPECT_FALSE(events[0].fencing_token().has_value());
  EXPECT_LE(events[0].at(), events[1].at());
  EXPECT_LE(events[1].at(), events[2].at());
}

TEST(History, AFileThatIsNotAHistoryIsRefusedNamingTheRecord) {
  temp_dir dir;
  const auto file = dir.path() / "not-a-history";
  std::ofstream(file) << std::string(sizeof(event), 'x');
  try {
    read_history(file);
    FAIL() << "a record without the format tag was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 0"), std::string::npos) << e.what();
  }
}

TEST(History, TheSharedClockIsTheSystemWideMonotonicClock) {
  // steady_clock is CLOCK_MONOTONIC in libstdc++ (read through libc): the raw read agrees.
  const auto before = std::chrono::steady_clock::now().time_since_epoch();
  const auto shared = shared_clock::now().time_since_epoch();
  const auto after = std::chrono::steady_clock::now().time_since_epoch();
  EXPECT_LE(before, shared);
  EXPECT_LE(shared, after);
}

TEST(FencedResource, RefusesASmallerTokenSeenThroughAnotherHandle) {
  temp_dir dir;
  const auto file = dir.path() / "fence";
  fenced_resource writer_a(file);
  fenced_resource writer_b(file);  // another process would open it the same way
  EXPECT_EQ(writer_a.admit(5).verdict, fence_verdict::accepted);
  EXPECT_EQ(writer_b.admit(3).verdict, fence_verdict::refused);
  EXPECT_EQ(writer_b.admit(5).verdict, fence_verdict::accepted) << "the same token is the same grant";
  EXPECT_EQ(writer_b.admit(std::nullopt).verdict, fence_verdict::no_token);
  EXPECT_EQ(writer_a.highest_accepted(), 5u);
  EXPECT_EQ(writer_b.admit(9).verdict, fence_verdict::accepted);
  EXPECT_EQ(writer_a.admit(6).verdict, fence_verdict::refused);
  EXPECT_EQ(writer_a.highest_accepted(), 9u);
}

}  // namespace
}  // namespace dlock::compare::testing
