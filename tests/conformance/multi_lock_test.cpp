// backend::make_multi_lock: canonical order, one deadline for the set, all or nothing, one loss.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <sstream>
#include <vector>

#include "conformance_test.hpp"
#include "dlock_test/high_water.hpp"
#include "dlock_test/lossy_counter.hpp"

namespace dlock::conformance {

namespace {

std::vector<std::string> names_of(const std::string& prefix, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(prefix + "-" + std::to_string(i));
  return names;
}

}  // namespace

TEST_P(Lock, MultiLockTakesNamesInByteOrderAndRefusesBadSets) {
  const auto base = dlock::testing::unique_name("multi-order");
  // Given out of order, with a byte above 0x7f (a signed char would sort it first).
  auto set = backend_->make_multi_lock({base + "-c", base + "-\xc3\xa9", base + "-a", base + "-b"}, options());
  const std::vector<std::string> expected = {base + "-a", base + "-b", base + "-c", base + "-\xc3\xa9"};
  EXPECT_EQ(set->names(), expected);
  ASSERT_EQ(set->member_locks().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(set->member_locks()[i]->name(), expected[i]);
  auto held = set->try_acquire();
  ASSERT_TRUE(held);
  ASSERT_EQ(held.members().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(held.members()[i].name(), expected[i]);
  EXPECT_TRUE(held.held());
  if (has(capability::fencing)) {
    for (const auto& name : expected) EXPECT_TRUE(held.fencing_token(name)) << "no fencing token for " << name;
  }
  held.release();

  std::error_code ec;
  EXPECT_FALSE(backend_->make_multi_lock({base + "-x", base + "-y", base + "-x"}, ec));
  EXPECT_EQ(ec, errc::invalid_name);
  EXPECT_NE(last_error_message().find("given twice"), std::string::npos) << last_error_message();
  EXPECT_FALSE(backend_->make_multi_lock(std::vector<std::string>{}, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(backend_->make_multi_lock({base + "-x", ""}, ec));
  EXPECT_EQ(ec, errc::invalid_name);
}

// Two holders that name the same sets in opposite orders: taken in one order, they never deadlock,
// and never hold a name at once.
TEST_P(Lock, MultiLockInOppositeOrdersNeitherDeadlocksNorOverlaps) {
  const auto names = names_of(dlock::testing::unique_name("multi-opposite"), 3);
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  constexpr int rounds = 10;
  std::atomic<int> inside{0}, max_inside{0}, failures{0};
  auto run = [&](std::vector<std::string> order) {
    try {
      auto set = backend_->make_multi_lock(order, options());
      for (int i = 0; i < rounds; ++i) {
        auto held = set->try_acquire_for(20s);
        if (!held) {
          ++failures;
          ADD_FAILURE() << "no progress: the set was not taken in 20 s (a deadlock?)";
          return;
        }
        dlock::testing::raise_to(max_inside, ++inside);
        std::this_thread::sleep_for(1ms);
        --inside;
        held.release();
      }
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << e.what();
    }
  };
  std::thread a(run, names), b(run, reversed);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1) << "two holders of the same set at once";
}

// The Curator trap: with a timeout per member, a set of N names whose holders each let go just
// before that timeout ends would wait N times the timeout. With one deadline, the set gives up by
// it: the first name comes free in time, the second only after the deadline.
TEST_P(Lock, MultiLockOneDeadlineCoversTheWholeSet) {
  const auto names = names_of(dlock::testing::unique_name("multi-deadline"), 3);
  constexpr auto timeout = 1000ms;
  std::vector<std::unique_ptr<distributed_lock>> others;
  std::vector<lease> blocking;
  for (const auto& n : names) {
    // Held past the test's 2.1 s with room for a starved watchdog: their loss is not what is tested.
    others.push_back(make(n, options(5000ms)));
    blocking.push_back(others.back()->try_acquire_for(5000ms + margin));  // through a server younger than a ttl
    ASSERT_TRUE(blocking.back()) << n;
  }
  auto set = backend_->make_multi_lock(names, options());
  const auto start = clock::now();
  std::thread releaser([&] {
    // Each name freed 0.7 timeouts after the one before: a per-member timeout would take all three.
    for (std::size_t i = 0; i < blocking.size(); ++i) {
      std::this_thread::sleep_until(start + (i + 1) * (timeout * 7 / 10));
      std::error_code ec;
      blocking[i].release(ec);
      if (ec) ADD_FAILURE() << "the holder of " << names[i] << " lost it: " << dlock::last_error_message();
    }
  });
  auto held = set->try_acquire_until(start + timeout);
  releaser.join();
  EXPECT_FALSE(held) << "the set was taken after its deadline: each member waited a timeout of its own";
  // All or nothing: the first name, which the set did take, was given back.
  for (const auto& n : names) EXPECT_TRUE(make(n)->try_acquire()) << n << " was left held by a set not taken";
}

TEST_P(Lock, MultiLockLeavesNothingHeldOnTimeoutOrStop) {
  const auto names = names_of(dlock::testing::unique_name("multi-partial"), 3);
  auto other = make(names.back());
  auto blocking = other->try_acquire();
  ASSERT_TRUE(blocking);
  auto set = backend_->make_multi_lock(names, options());
  EXPECT_FALSE(set->try_acquire());
  EXPECT_FALSE(set->try_acquire_for(200ms));
  for (std::size_t i = 0; i + 1 < names.size(); ++i)
    EXPECT_TRUE(make(names[i])->try_acquire()) << names[i] << " was left held after a set timed out";

  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  std::error_code ec;
  auto held = set->try_acquire_for(60s, stop.get_token(), ec);
  stopper.join();
  EXPECT_FALSE(held);
  EXPECT_EQ(ec, std::errc::operation_canceled);
  for (std::size_t i = 0; i + 1 < names.size(); ++i)
    EXPECT_TRUE(make(names[i])->try_acquire()) << names[i] << " was left held after a set's wait was stopped";
  blocking.release();
  EXPECT_TRUE(set->try_acquire()) << "the set could not be taken once every name was free";
}

// atomic_set: a try of a set that cannot be taken takes nothing at all, not even for a moment. A
// watcher tries the first name all the while a set whose last name is held is tried: taken member
// by member, the first name would be seen held between its grant and its give-back. Without the
// capability the set is still all or nothing in the end (the tests above), so there is nothing to
// watch.
TEST_P(Lock, MultiLockWithAtomicSetNeverHoldsPartOfASet) {
  if (!has(capability::atomic_set)) GTEST_SKIP() << label() << " takes a set member by member (no atomic_set)";
  const auto names = names_of(dlock::testing::unique_name("multi-atomic"), 3);
  auto other = make(names.back());
  auto blocking = other->try_acquire_for(margin);  // renewed by its watchdog while the test runs
  ASSERT_TRUE(blocking);
  auto set = backend_->make_multi_lock(names, options());
  std::atomic<bool> done{false};
  std::atomic<int> watched{0}, seen_held{0};
  std::thread watcher([&] {
    auto first = make(names.front());
    while (!done) {
      std::error_code ec;
      auto l = first->try_acquire(ec);
      if (ec) {
        ADD_FAILURE() << "the watcher's try failed: " << dlock::last_error_message();
        return;
      }
      ++watched;
      if (!l) ++seen_held;
    }
  });
  // At least 200 tries of the set, and on until the watcher has looked 100 times (a fast backend's
  // tries can all be over before the watcher's thread first runs).
  constexpr int least_tries = 200, least_watched = 100;
  const auto give_up = clock::now() + margin;
  int tries = 0, refused = 0;
  for (; tries < least_tries || (watched < least_watched && clock::now() < give_up); ++tries) {
    std::error_code ec;
    auto held = set->try_acquire(ec);
    ASSERT_FALSE(ec) << dlock::last_error_message();
    if (!held) ++refused;
  }
  done = true;
  watcher.join();
  EXPECT_EQ(refused, tries) << "a set was taken although one of its names was held";
  EXPECT_GE(watched.load(), least_watched);
  EXPECT_EQ(seen_held.load(), 0) << "the first name was seen held in " << seen_held << " of " << watched
                                 << " tries: a set that could not be taken held part of itself";
  blocking.release();
  auto whole = set->try_acquire();
  EXPECT_TRUE(whole) << "the set could not be taken once every name was free";
}

TEST_P(Lock, MultiLockIsLostWhenAnyMemberIsLost) {
  const auto names = names_of(dlock::testing::unique_name("multi-lost"), 3);
  const auto ttl = 1000ms;
  auto set = backend_->make_multi_lock(names, options(ttl, true));
  auto held = set->try_acquire();
  ASSERT_TRUE(held);
  if (!has(capability::lost_notification)) {
    std::this_thread::sleep_for(ttl / 2);
    EXPECT_FALSE(held.lost_token().stop_requested()) << "lost fired for a normally held set";
    return;
  }
  const auto* h = hooks();
  ASSERT_TRUE(h && h->break_lock) << "break_lock hook missing";
  std::atomic<bool> fired{false};
  std::stop_callback on_lost(held.lost_token(), [&] { fired = true; });
  const auto* middle = held.member(names[1]);
  ASSERT_TRUE(middle);
  h->break_lock(uri_, *middle);
  const auto deadline = clock::now() + ttl + margin;
  while (!fired && clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(fired) << "a member was broken but the set's lost_token() did not fire";
  EXPECT_TRUE(held.lost_reason());
  // Where the break ends a session the members share, any of them may be the first reported lost.
  EXPECT_NE(std::find(names.begin(), names.end(), held.lost_member()), names.end()) << held.lost_member();
  EXPECT_FALSE(held.held());
  std::error_code ec;
  held.release(ec);  // the others are released even though one was gone
  for (const auto& n : {names[0], names[2]})
    EXPECT_TRUE(make(n)->try_acquire_for(margin)) << n << " stayed held after the lost set was released";
}

// A member taken from the set by an operator's force_release: the set says so (lost, or not_owner at
// release), and its release still gives back every other member.
TEST_P(Lock, MultiLockReleaseGivesBackEveryMemberWhenOneWasTaken) {
  const auto* h = hooks();
  ASSERT_TRUE(h);
  if (!h->inspection.force_release) GTEST_SKIP() << label() << " declares no force_release";
  const auto names = names_of(dlock::testing::unique_name("multi-forced"), 3);
  const auto ttl = 5000ms;
  auto set = backend_->make_multi_lock(names, options(ttl, false));
  auto held = set->try_acquire_for(ttl + margin);  // through a server younger than a ttl
  ASSERT_TRUE(held);
  std::error_code ec;
  const auto removed = backend_->force_release(names[1], ec);
  ASSERT_FALSE(ec) << dlock::last_error_message();
  ASSERT_EQ(removed.size(), 1u);
  auto next = make(names[1]);
  auto theirs = next->try_acquire_for(margin);
  EXPECT_TRUE(theirs) << "the name was not free after force_release";
  const bool reported_lost = held.lost_token().stop_requested();
  held.release(ec);
  EXPECT_TRUE(reported_lost || ec == errc::not_owner)
      << "the set neither saw its member lost nor was told not_owner on release";
  for (const auto& n : {names[0], names[2]})
    EXPECT_TRUE(make(n)->try_acquire()) << n << " stayed held after the set's release reported a missing member";
}

// 8 processes take random subsets of 5 names, each given in a random order, for 30 s: no overlap
// on any name (the workers' markers, and the counters add up), no deadlock, and every process makes
// progress. A soak: run on a few backends of different kinds, not on every target.
TEST_P(Lock, MultiLockSoakAcrossProcesses) {
  static const std::vector<std::string> soaked = {"file", "redis", "postgres_index", "zookeeper"};
  if (std::find(soaked.begin(), soaked.end(), label()) == soaked.end())
    GTEST_SKIP() << "the 30 s soak runs on file, redis, postgres_index and zookeeper only";
  constexpr int processes = 8, names = 5, seconds = 30;
  const auto prefix = dlock::testing::unique_name("multi-soak") + "-";
  const auto dir = std::filesystem::temp_directory_path() / dlock::testing::unique_name("dlock-multi-soak");
  std::filesystem::create_directories(dir);
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (int p = 0; p < processes; ++p)
    children.push_back(std::make_unique<dlock::testing::child_process>(
        std::vector<std::string>{DLOCK_CONFORMANCE_WORKER, "multi-rmw", uri_, prefix, dir.string(),
                                 std::to_string(seconds), std::to_string(1000 + p)}));
  long taken[names] = {};
  for (auto& c : children) {
    const auto rounds = c->read_line(std::chrono::seconds(seconds + 60));
    const auto counts = c->read_line(5s);
    ASSERT_TRUE(rounds && counts) << "a worker printed no result (see its stderr above)";
    std::istringstream r(*rounds), t(*counts);
    std::string word;
    long n = 0;
    r >> word >> n;
    EXPECT_GT(n, 0) << "a worker made no progress";
    t >> word;
    for (auto& total : taken) {
      long k = 0;
      t >> k;
      total += k;
    }
  }
  ASSERT_NO_FATAL_FAILURE(expect_workers_succeed(children, 30s, "a worker saw another holder inside a name"));
  for (int i = 0; i < names; ++i)
    EXPECT_EQ(dlock::testing::read_counter((dir / (prefix + std::to_string(i))).string()), taken[i])
        << "lost updates on name " << i << ": two sets held it at once";
  std::filesystem::remove_all(dir);
}

}  // namespace dlock::conformance
