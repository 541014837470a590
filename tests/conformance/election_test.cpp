// backend::make_election: one leader at a time, terms that strictly increase, a demotion that fires
// before the next leader, a campaign that a stop request ends, and the leader as the server sees it.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "conformance_test.hpp"
#include "dlock_test/high_water.hpp"

namespace dlock::conformance {

namespace {

bool electable(const capabilities& caps) {
  return caps.has(capability::fencing) && caps.has(capability::lost_notification);
}

}  // namespace

class Election : public Lock {
 protected:
  // A candidate with an owner id of its own: two candidates of one process must not be one owner
  // (a reentrant backend would grant the second while the first leads).
  std::unique_ptr<election> candidate(const std::string& name, const std::string& id,
                                      std::chrono::milliseconds ttl = 1000ms) const {
    auto o = options(ttl);
    o.owner = id + "-" + dlock::testing::unique_name("candidate");
    return backend_->make_election(name, o);
  }
};

TEST_P(Election, OfferedExactlyWhereTheLockHasFencingAndLostNotification) {
  const auto name = dlock::testing::unique_name("elect-caps");
  std::error_code ec;
  auto vote = backend_->make_election(name, options(), ec);
  if (!electable(caps_)) {
    EXPECT_FALSE(vote);
    EXPECT_EQ(ec, errc::not_supported);
    const auto message = last_error_message();
    EXPECT_TRUE(message.find("fencing") != std::string::npos || message.find("lost_notification") != std::string::npos)
        << "the refusal does not name what the lock lacks: " << message;
    return;
  }
  ASSERT_TRUE(vote) << last_error_message();
  EXPECT_EQ(vote->name(), name);
  EXPECT_FALSE(vote->id().empty());
  std::error_code bad;
  EXPECT_FALSE(backend_->make_election("", options(), bad));
  EXPECT_EQ(bad, errc::invalid_name);
}

// Four candidates campaign and resign in turn: never two leaders at once, and each new leader's
// term is greater than every earlier leader's.
TEST_P(Election, OneLeaderAtATimeAndEachTermGreaterThanTheLast) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election (checked by OfferedExactly...)";
  const auto name = dlock::testing::unique_name("elect-terms");
  constexpr int candidates = 4, rounds = 8;
  std::atomic<int> leaders{0}, max_leaders{0}, failures{0};
  std::mutex log_mutex;
  std::vector<std::uint64_t> terms;  // in the order the leaders were elected
  auto campaign = [&](int i) {
    try {
      auto vote = candidate(name, "c" + std::to_string(i));
      for (int r = 0; r < rounds; ++r) {
        auto leading = vote->campaign_for(30s);
        if (!leading) {
          ++failures;
          ADD_FAILURE() << "candidate " << i << " was not elected in 30 s";
          return;
        }
        dlock::testing::raise_to(max_leaders, ++leaders);
        {
          const std::lock_guard guard(log_mutex);
          terms.push_back(leading.term());
        }
        EXPECT_TRUE(leading.leading());
        std::this_thread::sleep_for(2ms);
        --leaders;
        leading.resign();
      }
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "candidate " << i << ": " << e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < candidates; ++i) threads.emplace_back(campaign, i);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_leaders.load(), 1) << "two leaders at once";
  ASSERT_EQ(terms.size(), static_cast<std::size_t>(candidates * rounds));
  for (std::size_t i = 1; i < terms.size(); ++i)
    EXPECT_LT(terms[i - 1], terms[i]) << "leader " << i << "'s term is not greater than the one before it";
}

// A leader whose grant runs out (its renewals stopped, as when it is cut off from the server) is
// demoted by its own clock before the server lets the next candidate in: demotion comes first.
// Where the client library keeps the grant alive by itself (ZooKeeper's session heartbeats), no
// grant runs out in-process: cli/elect partitions such a leader instead.
TEST_P(Election, ALeaderWhoseGrantRunsOutIsDemotedBeforeTheNextIsElected) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election";
  const auto* h = hooks();
  ASSERT_TRUE(h);
  if (h->validity_kept_alive) GTEST_SKIP() << label() << " keeps a grant alive by itself: cli/elect partitions it";
  const auto name = dlock::testing::unique_name("elect-ran-out");
  const auto ttl = 1000ms;
  auto o = options(ttl, false);  // no watchdog: the grant runs out at its ttl
  o.owner = dlock::testing::unique_name("silent-leader");
  auto first = backend_->make_election(name, o);
  auto second = candidate(name, "second", ttl);
  auto leading = first->try_campaign();
  ASSERT_TRUE(leading);
  std::atomic<bool> demoted{false};
  std::stop_callback on_demoted(leading.demoted_token(), [&] { demoted = true; });
  auto next = second->campaign_for(ttl + 2 * margin);
  const bool demoted_when_elected = demoted.load();
  ASSERT_TRUE(next) << "no new leader after the leader's grant ran out";
  EXPECT_TRUE(demoted_when_elected) << "a new leader was elected before the old one's demotion fired";
  EXPECT_FALSE(leading.leading());
  EXPECT_GT(next.term(), leading.term());
}

// The leader's grant is broken from outside (a session expired, a key deleted, a connection
// killed): its demotion token fires, a new leader is elected with a greater term, and resigning the
// lost leadership says it was lost. (A grant deleted on the server frees the name at once, before
// its holder can know: the term is what protects the resource then.)
TEST_P(Election, ALeaderWhoseGrantIsBrokenIsDemotedAndTheNextHasAGreaterTerm) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election";
  const auto* h = hooks();
  ASSERT_TRUE(h && h->break_lock) << "break_lock hook missing";
  const auto name = dlock::testing::unique_name("elect-broken");
  const auto ttl = 1000ms;
  auto first = candidate(name, "first", ttl);
  auto second = candidate(name, "second", ttl);
  auto leading = first->try_campaign();
  ASSERT_TRUE(leading);
  std::atomic<bool> demoted{false};
  std::stop_callback on_demoted(leading.demoted_token(), [&] { demoted = true; });
  h->break_lock(uri_, leading.grant());
  auto next = second->campaign_for(ttl + 2 * margin);
  ASSERT_TRUE(next) << "no new leader after the leader's grant was broken";
  EXPECT_GT(next.term(), leading.term());
  const auto deadline = clock::now() + ttl + margin;
  while (!demoted && clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(demoted) << "the broken leader's demotion token did not fire";
  EXPECT_FALSE(leading.leading());
  EXPECT_TRUE(leading.demoted_reason());
  std::error_code ec;
  leading.resign(ec);
  EXPECT_TRUE(ec) << "resigning a leadership already lost reported nothing";
}

TEST_P(Election, AStopRequestEndsACampaignAndLeavesNothingBehind) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election";
  const auto name = dlock::testing::unique_name("elect-stop");
  auto first = candidate(name, "first", 10000ms);
  auto second = candidate(name, "second", 10000ms);
  auto leading = first->try_campaign();
  ASSERT_TRUE(leading);
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  std::error_code ec;
  auto not_elected = second->campaign_until(clock::now() + 60s, stop.get_token(), ec);
  stopper.join();
  EXPECT_FALSE(not_elected);
  EXPECT_EQ(ec, std::errc::operation_canceled);
  leading.resign();
  // The stopped campaign left no queued candidate behind: a third is elected well within a ttl (the
  // bound is the cancellation tests': a server may take a moment to drop a stopped waiter's request).
  auto third = candidate(name, "third", 10000ms);
  EXPECT_TRUE(third->campaign_for(margin)) << "a stopped campaign left a candidate queued ahead";
}

// Who leads, as the server records it: nobody, then the leader (its id where the layout records
// the owner, its term where it records the fencing token), then nobody after it resigns.
TEST_P(Election, TheLeaderIsObservedAsTheServerRecordsIt) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election";
  const auto* h = hooks();
  ASSERT_TRUE(h);
  const auto name = dlock::testing::unique_name("elect-observe");
  auto watcher = candidate(name, "watcher");
  std::error_code ec;
  if (!h->inspection.inspect) {
    (void)watcher->leader(ec);
    EXPECT_EQ(ec, errc::not_supported) << label() << " declares no inspect, yet leader() did not refuse";
    return;
  }
  EXPECT_FALSE(watcher->leader().elected);
  auto vote = candidate(name, "leader");
  auto leading = vote->try_campaign();
  ASSERT_TRUE(leading);
  const auto seen = watcher->leader();
  EXPECT_TRUE(seen.elected);
  EXPECT_FALSE(seen.id.empty());
  if (h->inspection.owner == dlock::testing::backend_hooks::inspection_support::owner_record::owner_id) {
    EXPECT_EQ(seen.id, vote->id());
  }
  if (seen.term) {
    EXPECT_EQ(*seen.term, leading.term());
  }
  leading.resign();
  EXPECT_FALSE(watcher->leader().elected) << "a leader is still seen after it resigned";
}

// An election and the lock of the same name are one lock: a leader keeps the lock's holders out,
// and a holder of the lock keeps every candidate from leading.
TEST_P(Election, AnElectionAndTheLockOfItsNameExcludeEachOther) {
  if (!electable(caps_)) GTEST_SKIP() << label() << " makes no election";
  const auto name = dlock::testing::unique_name("elect-lock");
  auto vote = candidate(name, "leader");
  auto leading = vote->try_campaign();
  ASSERT_TRUE(leading);
  EXPECT_FALSE(make(name)->try_acquire()) << "the lock of the election's name was taken while a candidate led";
  leading.resign();
  auto held = make(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(vote->try_campaign()) << "a candidate was elected while the lock of its name was held";
}

INSTANTIATE_TEST_SUITE_P(, Election, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance
