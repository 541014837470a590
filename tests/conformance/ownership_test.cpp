#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, ReleaseByANonOwnerDoesNotRelease) {
  const auto name = dlock::testing::unique_name("not-owner");
  const auto ttl = 600ms;
  auto first = make(name, options(ttl, false)), second = make(name), third = make(name);
  auto stale = first->try_acquire();
  ASSERT_TRUE(stale);
  const bool kept_alive = hooks() && hooks()->validity_kept_alive;
  if (has(capability::expiring) && stale.valid_until() != clock::time_point::max() && !kept_alive) {
    std::this_thread::sleep_until(stale.valid_until() + ttl / 2);  // the grant expired
  } else {
    const auto* h = hooks();
    ASSERT_TRUE(h && h->break_lock) << "without ttl expiry this test needs the backend's break_lock hook";
    h->break_lock(uri_, stale);
  }
  auto now_theirs = second->try_acquire_for(ttl + margin);
  ASSERT_TRUE(now_theirs) << "the broken/expired grant was not acquirable by another owner";
  std::error_code ec;
  stale.release(ec);
  EXPECT_EQ(ec, errc::not_owner) << "releasing a grant that went to another owner must say not_owner";
  EXPECT_FALSE(third->try_acquire()) << "the stale release freed the new owner's lock";
}

TEST_P(Lock, ReleasingTwiceIsANoOp) {
  const auto name = dlock::testing::unique_name("twice");
  auto mine = make(name), theirs = make(name), probe = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  held.release();
  auto now_theirs = theirs->try_acquire();
  ASSERT_TRUE(now_theirs);
  std::error_code ec;
  held.release(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(probe->try_acquire()) << "the second release freed someone else's lock";
}

TEST_P(Lock, ALeaseMayBeReleasedFromAnotherThread) {
  const auto name = dlock::testing::unique_name("other-thread");
  auto mine = make(name), theirs = make(name);
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  std::error_code ec;
  std::thread([&] { held.release(ec); }).join();
  EXPECT_FALSE(ec) << dlock::last_error_message();
  EXPECT_TRUE(theirs->try_acquire());
}

TEST_P(Lock, ServerProbeAgrees) {
  const auto* h = hooks();
  ASSERT_TRUE(h && h->is_held_on_server) << "is_held_on_server hook missing";
  const auto name = dlock::testing::unique_name("probe");
  auto lock = make(name);
  auto held = lock->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_TRUE(h->is_held_on_server(uri_, name));
  held.release();
  EXPECT_FALSE(h->is_held_on_server(uri_, name));
}

}  // namespace dlock::conformance
