// adapters/: timed_lockable with the standard lock types, with_lock, reentrant_lock, over the
// embedded backends (memory:// in-process, file:// across processes).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>

#include "dlock/dlock.hpp"
#include "dlock/reentrant_lock.hpp"
#include "dlock/timed_lockable.hpp"
#include "dlock/with_lock.hpp"

using namespace std::chrono_literals;

namespace {

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "adapters/" + what + "/" + std::to_string(::getpid()) + "/" + std::to_string(n++);
}

class Adapters : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend_ = dlock::open(GetParam()); }
  std::shared_ptr<dlock::backend> backend_;
};

TEST_P(Adapters, UniqueLockExcludesAnotherOwnerAndReleases) {
  const auto name = unique("unique_lock");
  dlock::timed_lockable m(backend_->make_lock(name));
  auto other = backend_->make_lock(name);
  {
    std::unique_lock guard(m);
    ASSERT_TRUE(guard.owns_lock());
    EXPECT_TRUE(m.current_lease().held());
    EXPECT_FALSE(other->try_acquire()) << "another owner got the lock while unique_lock held it";
  }
  EXPECT_TRUE(other->try_acquire()) << "~unique_lock did not release the distributed lock";
}

TEST_P(Adapters, ScopedLockAndLockGuard) {
  dlock::timed_lockable a(backend_->make_lock(unique("scoped_a"))), b(backend_->make_lock(unique("scoped_b")));
  {
    std::scoped_lock both(a, b);
    EXPECT_TRUE(a.current_lease().held());
    EXPECT_TRUE(b.current_lease().held());
  }
  { std::lock_guard g(a); }
  EXPECT_TRUE(a.try_lock());
  a.unlock();
}

TEST_P(Adapters, TryLockForTimesOutWhileAnotherOwnerHolds) {
  const auto name = unique("try_lock_for");
  auto holder = backend_->make_lock(name);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  dlock::timed_lockable m(backend_->make_lock(name));
  std::unique_lock guard(m, std::defer_lock);
  EXPECT_FALSE(guard.try_lock_for(50ms));
  EXPECT_FALSE(guard.try_lock_until(std::chrono::system_clock::now() + 50ms));
  held.release();
  EXPECT_TRUE(guard.try_lock_until(std::chrono::system_clock::now() + 2s));
  EXPECT_EQ(m.fencing_token(), m.current_lease().fencing_token());
}

TEST_P(Adapters, ThreadsSharingOneTimedLockableExcludeEachOther) {
  dlock::timed_lockable m(backend_->make_lock(unique("threads")));
  int counter = 0;
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::unique_lock g(m);
        if (inside++ != 0) ++overlaps;
        const int read = counter;
        std::this_thread::yield();
        counter = read + 1;
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, 100);
}

TEST_P(Adapters, ConditionVariableAnyWaitsWithTheLock) {
  dlock::timed_lockable m(backend_->make_lock(unique("cv")));
  std::condition_variable_any cv;
  bool ready = false;
  std::thread producer([&] {
    std::lock_guard g(m);
    ready = true;
    cv.notify_all();
  });
  {
    std::unique_lock g(m);
    EXPECT_TRUE(cv.wait_for(g, 10s, [&] { return ready; }));
  }
  producer.join();
}

TEST_P(Adapters, WithLockReturnsTheResultAndReleases) {
  const auto name = unique("with_lock");
  auto lock = backend_->make_lock(name);
  const int r = dlock::with_lock(*lock, 1s, [](const dlock::lease& l) { return l.held() ? 42 : -1; });
  EXPECT_EQ(r, 42);
  std::string s = dlock::with_lock(*lock, 1s, [] { return std::string("no lease argument"); });
  EXPECT_EQ(s, "no lease argument");
  EXPECT_TRUE(backend_->make_lock(name)->try_acquire()) << "with_lock did not release";
}

TEST_P(Adapters, WithLockPropagatesTheFunctionsExceptionAndReleases) {
  const auto name = unique("with_lock_throw");
  auto lock = backend_->make_lock(name);
  EXPECT_THROW(dlock::with_lock(*lock, 1s, [] { throw std::runtime_error("business failure"); }), std::runtime_error);
  EXPECT_TRUE(backend_->make_lock(name)->try_acquire()) << "the lease was not released after fn threw";
}

TEST_P(Adapters, WithLockTimesOutNamingTheLock) {
  const auto name = unique("with_lock_timeout");
  auto held = backend_->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto lock = backend_->make_lock(name);
  bool called = false;
  try {
    dlock::with_lock(*lock, 50ms, [&] { called = true; });
    ADD_FAILURE() << "with_lock did not time out";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::timeout);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("50ms"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(called);
}

TEST_P(Adapters, ReentrantLockCountsHoldsAndReleasesTheInnerGrantAtZero) {
  const auto name = unique("reentrant");
  dlock::reentrant_lock lock(backend_->make_lock(name));
  EXPECT_TRUE(lock.caps().has(dlock::capability::reentrant));
  auto other = backend_->make_lock(name);
  auto first = lock.try_acquire();
  ASSERT_TRUE(first);
  auto second = lock.try_acquire();
  ASSERT_TRUE(second) << "re-acquiring through the same wrapper must succeed";
  EXPECT_EQ(lock.hold_count(), 2u);
  EXPECT_EQ(first.fencing_token(), second.fencing_token());
  EXPECT_FALSE(other->try_acquire()) << "another owner got a lock held through reentrant_lock";
  first.release();
  EXPECT_EQ(lock.hold_count(), 1u);
  EXPECT_FALSE(other->try_acquire()) << "the inner grant was released while one hold remained";
  second.release();
  EXPECT_EQ(lock.hold_count(), 0u);
  EXPECT_TRUE(other->try_acquire()) << "the inner grant was not released when the count reached zero";
}

TEST_P(Adapters, AnotherReentrantWrapperIsAnotherOwner) {
  const auto name = unique("reentrant_owner");
  dlock::reentrant_lock a(backend_->make_lock(name)), b(backend_->make_lock(name));
  auto held = a.acquire();
  EXPECT_FALSE(b.try_acquire());
  EXPECT_FALSE(b.try_acquire_for(30ms));
}

INSTANTIATE_TEST_SUITE_P(Embedded, Adapters,
                         ::testing::Values(std::string("memory://"),
                                           "file:///tmp/dlock-adapters-test-" + std::to_string(::getuid())),
                         [](const auto& info) { return info.param.substr(0, info.param.find(':')); });

}  // namespace

namespace {

// The inner grant expires (no watchdog, short ttl): every outer lease of reentrant_lock must be
// marked lost through the forwarded lost signal.
TEST(ReentrantLock, InnerLossMarksEveryOuterLeaseLost) {
  auto backend = dlock::open("memory://?ttl=300ms&watchdog=false");
  dlock::reentrant_lock lock(backend->make_lock(unique("reentrant_lost")));
  auto first = lock.acquire();
  auto second = lock.acquire();
  ASSERT_TRUE(first.held());
  ASSERT_TRUE(second.held());
  std::mutex m;
  std::condition_variable cv;
  int fired = 0;
  auto count = [&] {
    std::lock_guard g(m);
    ++fired;
    cv.notify_all();
  };
  std::stop_callback a(first.lost_token(), count), b(second.lost_token(), count);
  std::unique_lock g(m);
  EXPECT_TRUE(cv.wait_for(g, 10s, [&] { return fired == 2; })) << "outer leases were not marked lost";
  EXPECT_FALSE(first.held());
  EXPECT_EQ(first.lost_reason(), dlock::errc::lock_lost);
}

}  // namespace
