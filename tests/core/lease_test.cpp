#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "dlock/dlock.hpp"
#include "test_backend.hpp"

namespace {

using namespace dlock;
using namespace std::chrono_literals;

struct captured_errors {
  std::mutex m;
  std::vector<std::pair<std::error_code, std::string>> seen;
  background_error_handler previous;
  captured_errors() {
    previous = set_background_error_handler([this](std::error_code ec, std::string_view msg) {
      std::lock_guard g(m);
      seen.emplace_back(ec, std::string(msg));
    });
  }
  ~captured_errors() { set_background_error_handler(previous); }
  bool has(errc e) {
    std::lock_guard g(m);
    for (auto& [ec, msg] : seen)
      if (ec == e) return true;
    return false;
  }
};

TEST(Lease, EmptyLease) {
  lease l;
  EXPECT_FALSE(l);
  EXPECT_FALSE(l.held());
  EXPECT_FALSE(l.fencing_token());
  EXPECT_NO_THROW(l.release());
  EXPECT_FALSE(l.lost_token().stop_possible());
  EXPECT_THROW(l.renew(), dlock::error);
}

TEST(Lease, MoveAssignReleasesTheOverwrittenLease) {
  core_test::test_backend b({});
  auto a = b.make_lock("a"), a2 = b.make_lock("a"), c = b.make_lock("c");
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(a2->try_acquire());
  held = c->try_acquire();
  EXPECT_TRUE(a2->try_acquire()) << "move-assign did not release the overwritten lease";
}

TEST(Lease, DestructorReleaseFailureIsReported) {
  captured_errors errors;
  core_test::test_backend b({});
  {
    auto held = b.make_lock("x")->try_acquire();
    ASSERT_TRUE(held);
    std::lock_guard g(b.t->m);
    b.t->owner_of["x"] = "someone else";
  }
  EXPECT_TRUE(errors.has(errc::not_owner)) << "a failed release in the destructor was dropped";
}

TEST(Lease, SecondReleaseIsANoOpAndNotOwnerMarksLost) {
  core_test::test_backend b({});
  auto held = b.make_lock("x")->try_acquire();
  {
    std::lock_guard g(b.t->m);
    b.t->owner_of["x"] = "someone else";
  }
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, errc::not_owner);
  EXPECT_TRUE(held.lost_token().stop_requested());
  held.release(ec);
  EXPECT_FALSE(ec);
}

TEST(Lease, RenewOnANonRenewableBackendIsNotSupported) {
  core_test::test_backend b({});
  auto held = b.make_lock("x")->try_acquire();
  try {
    held.renew(1s);
    FAIL();
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), errc::not_supported);
  }
}

TEST(Watchdog, RenewsAtATthirdOfTheTtl) {
  core_test::test_backend b({capability::expiring, capability::renewable});
  lock_options o;
  o.ttl = 600ms;
  auto held = b.make_lock("x", o)->try_acquire();
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(1100ms);  // renewals due at 200, 400, 600, 800, 1000 ms
  const int n = b.t->renewals.load();
  EXPECT_GE(n, 3);
  EXPECT_LE(n, 6);
  EXPECT_FALSE(held.lost_token().stop_requested()) << "lost fired although renewals succeeded";
}

// A released lease leaves nothing in the watchdog: its validity timer (as long as the ttl) and its
// renewal go at release, not when they fall due, so a service granting thousands of locks a second
// does not pile up timers.
TEST(Watchdog, ForgetsAReleasedLeaseAtOnce) {
  auto b = dlock::open("memory://watchdog-forget");
  lock_options renewed, not_renewed;
  renewed.ttl = not_renewed.ttl = 30s;
  not_renewed.watchdog = false;
  const auto before = current_watchdog_load();
  for (int i = 0; i < 2000; ++i) {
    auto with_renewal = b->make_lock("a", renewed)->try_acquire();
    auto without = b->make_lock("b", not_renewed)->try_acquire();
    ASSERT_TRUE(with_renewal && without);
    with_renewal.release();
    without.release();
  }
  const auto after = current_watchdog_load();
  EXPECT_LE(after.leases, before.leases + 2) << "released leases are still tracked";
  EXPECT_LE(after.timers, before.timers + 4) << "timers of released leases are still pending";
}

TEST(Watchdog, FiresLostWhenRenewalFails) {
  captured_errors errors;
  core_test::test_backend b({capability::expiring, capability::renewable});
  lock_options o;
  o.ttl = 300ms;
  auto held = b.make_lock("x", o)->try_acquire();
  b.t->fail_renew = true;
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (!held.lost_token().stop_requested() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(held.lost_token().stop_requested());
  EXPECT_TRUE(held.lost_reason());
}

TEST(Watchdog, FiresLostWhenValidityRunsOutWithoutWatchdog) {
  captured_errors errors;
  core_test::test_backend b({capability::expiring});
  lock_options o;
  o.ttl = 200ms;
  auto held = b.make_lock("x", o)->try_acquire();
  std::this_thread::sleep_for(600ms);
  EXPECT_TRUE(held.lost_token().stop_requested());
  EXPECT_EQ(held.lost_reason(), errc::lock_lost);
  EXPECT_EQ(b.t->renewals.load(), 0);
}

// A grant that arrives with its validity already gone is never returned: try_acquire gives it
// back (the name is free again), and a wait goes on to a grant with validity left.
TEST(Acquire, AGrantThatArrivesExpiredIsGivenBackNotReturned) {
  core_test::test_backend b({capability::expiring});
  lock_options o;
  o.ttl = 5s;
  auto lock = b.make_lock("stalled", o);
  b.t->stalled_grants = 1;
  auto first = lock->try_acquire();
  EXPECT_FALSE(first) << "a lease past its valid_until was returned as a success";
  {
    std::lock_guard g(b.t->m);
    EXPECT_EQ(b.t->owner_of.count("stalled"), 0u) << "the refused grant was left on the server";
  }
  b.t->stalled_grants = 2;
  auto waited = lock->try_acquire_for(5s);
  ASSERT_TRUE(waited);
  EXPECT_TRUE(waited.held());
  EXPECT_GT(waited.remaining(), 4s);
  EXPECT_EQ(b.t->attempts.load(), 4);
}

// Options whose wait tries again every 1 to 5 ms: an outage meets many attempts.
lock_options polling_fast() {
  lock_options o;
  o.poll = {1ms, 5ms};
  return o;
}

// A server outage inside the caller's wait is waited out, not reported at once (a Redis restart
// made `dlock run --wait 60s` exit 69 at once).
TEST(Acquire, AnOutageWithinTheWaitIsWaitedOut) {
  core_test::test_backend b({capability::expiring});
  auto lock = b.make_lock("outage", polling_fast());
  b.t->unavailable_attempts = 5;
  std::error_code ec;
  auto l = lock->try_acquire_for(10s, ec);
  EXPECT_FALSE(ec) << ec.message() << ": " << last_error_message();
  EXPECT_TRUE(l);
  EXPECT_EQ(b.t->attempts.load(), 6);
}

TEST(Acquire, AnOutageLongerThanTheWaitIsReportedAtTheDeadline) {
  core_test::test_backend b({capability::expiring});
  auto lock = b.make_lock("down", polling_fast());
  b.t->unavailable_attempts = 1'000'000;
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  auto l = lock->try_acquire_for(300ms, ec);
  EXPECT_FALSE(l);
  EXPECT_EQ(ec, errc::backend_unavailable) << "an outage must not look like contention";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_GT(b.t->attempts.load(), 2);
  // One attempt means one attempt: try_acquire reports the outage at once.
  b.t->attempts = 0;
  auto once = lock->try_acquire(ec);
  EXPECT_EQ(ec, errc::backend_unavailable);
  EXPECT_EQ(b.t->attempts.load(), 1);
}

// A holder that checks held() before a write must see false once its validity is gone, even
// before the watchdog fired lost (a paused process resumes before the watchdog thread runs).
TEST(Lease, HeldIsFalseOncePastValidUntilEvenBeforeTheWatchdogFires) {
  core_test::test_backend b({capability::expiring});
  lock_options o;
  o.ttl = 300ms;
  auto l = b.make_lock("held", o)->try_acquire();
  ASSERT_TRUE(l.held());
  std::this_thread::sleep_until(l.valid_until() + 1ms);
  EXPECT_EQ(l.remaining(), 0ms);
  EXPECT_FALSE(l.held()) << "held() said true with no validity left";
}

}  // namespace
