#include <mutex>
#include <vector>

#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, ReentrancyExactlyAsDeclared) {
  const auto name = dlock::testing::unique_name("reentrant");
  auto mine = make(name), theirs = make(name);
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = mine->try_acquire();
  EXPECT_EQ(static_cast<bool>(inner), has(capability::reentrant))
      << "the same lock object acquiring again must succeed iff the backend is reentrant";
  EXPECT_FALSE(theirs->try_acquire()) << "another object acquired a held lock";
  if (inner) {
    inner.release();
    EXPECT_FALSE(theirs->try_acquire()) << "releasing the inner lease freed the lock";
  }
  outer.release();
  EXPECT_TRUE(theirs->try_acquire()) << "not free after the outer release";
}

TEST_P(Lock, FifoWhereDeclaredFair) {
  const auto name = dlock::testing::unique_name("fifo");
  auto first = make(name);
  auto held = first->try_acquire();
  ASSERT_TRUE(held);
  constexpr int waiters = 4;
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      auto lock = make(name);
      auto got = lock->try_acquire_for(30s);
      if (!got) return;
      {
        std::lock_guard g(m);
        order.push_back(i);
      }
      std::this_thread::sleep_for(20ms);
    });
    std::this_thread::sleep_for(200ms);  // the previous waiter is surely waiting by now
  }
  held.release();
  for (auto& t : threads) t.join();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(waiters)) << "a waiter never got the lock";
  if (!has(capability::fair)) GTEST_SKIP() << "not declared fair: every waiter got the lock, no order can be asserted";
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3})) << "waiters were not granted in arrival order";
}

}  // namespace dlock::conformance
