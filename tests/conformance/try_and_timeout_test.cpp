#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, SecondOwnerIsRefusedWhileHeldAndFreeAfterRelease) {
  const auto name = dlock::testing::unique_name("second-owner");
  auto mine = make(name), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(theirs->try_acquire()) << "a second owner acquired a held lock";
  held.release();
  auto now_theirs = theirs->try_acquire();
  EXPECT_TRUE(now_theirs) << "the lock is not free after release";
}

TEST_P(Lock, TryAcquireForHonoursItsDeadline) {
  const auto name = dlock::testing::unique_name("deadline");
  auto mine = make(name), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  const auto timeout = 300ms;
  const auto start = clock::now();
  auto got = theirs->try_acquire_for(timeout);
  const auto took = clock::now() - start;
  EXPECT_FALSE(got);
  EXPECT_GE(took, timeout) << "gave up before the deadline";
  EXPECT_LE(took, timeout + 2s) << "returned far after the deadline";
}

TEST_P(Lock, TryAcquireForGetsTheLockWhenReleasedMeanwhile) {
  const auto name = dlock::testing::unique_name("handover");
  auto mine = make(name), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  std::thread releaser([&] {
    std::this_thread::sleep_for(200ms);
    held.release();
  });
  auto got = theirs->try_acquire_for(10s);
  releaser.join();
  EXPECT_TRUE(got);
}

}  // namespace dlock::conformance
