#include <atomic>

#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, LostNotificationExactlyAsDeclared) {
  const auto name = dlock::testing::unique_name("lost");
  const auto ttl = 1000ms;
  auto mine = make(name, options(ttl, true));
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  if (!has(capability::lost_notification)) {
    std::this_thread::sleep_for(ttl / 2);
    EXPECT_FALSE(held.lost_token().stop_requested()) << "lost fired for a normally held lease";
    return;
  }
  const auto* h = hooks();
  ASSERT_TRUE(h && h->break_lock) << "break_lock hook missing";
  std::atomic<bool> fired{false};
  std::stop_callback on_lost(held.lost_token(), [&] { fired = true; });
  h->break_lock(uri_, held);
  const auto deadline = clock::now() + ttl + margin;
  while (!fired && clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(fired) << "break_lock broke the grant but lost_token() did not fire";
  EXPECT_TRUE(held.lost_reason()) << "lost_reason() not set";
  auto theirs = make(name);
  EXPECT_TRUE(theirs->try_acquire_for(ttl + margin)) << "break_lock did not really break the lock";
}

}  // namespace dlock::conformance
