#pragma once
// The slow holder of the well-known unsafe lock recipes (redis+unsafe-del, memcached+unsafe-delete)
// and of the safe schemes beside them: its grant runs out while it still works, a successor is
// granted, then the slow holder releases, and a third client tries.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <system_error>

#include "dlock/dlock.hpp"

namespace dlock::testing {

// A holder that "works" past its ttl with nobody renewing; a waiter polls every 10 to 50 ms.
inline dlock::lock_options unrenewed_options(const dlock::backend& b, std::chrono::milliseconds ttl) {
  using namespace std::chrono_literals;
  auto o = b.default_options();
  o.ttl = ttl;
  o.watchdog = false;
  o.poll = {10ms, 50ms};
  return o;
}

struct slow_holder_outcome {
  std::error_code a_release;
  bool c_granted_while_b_holds = false;
};

// A's grant (ttl `a_ttl`) runs out while A still works; B is granted; A releases; C tries.
// `wait_until_a_expired` waits (bounded) until A's grant is gone from the server, and fails the
// test when it is not.
inline slow_holder_outcome slow_holder_releases_after_expiry(dlock::backend& b, const std::string& name,
                                                             std::chrono::milliseconds a_ttl,
                                                             const std::function<void()>& wait_until_a_expired) {
  using namespace std::chrono_literals;
  slow_holder_outcome out;
  auto a_lock = b.make_lock(name, unrenewed_options(b, a_ttl));
  auto b_lock = b.make_lock(name, unrenewed_options(b, 30s));
  auto c_lock = b.make_lock(name, unrenewed_options(b, 30s));
  auto a = a_lock->try_acquire();
  EXPECT_TRUE(a) << "A was not granted a free lock";
  wait_until_a_expired();
  auto b_lease = b_lock->try_acquire_for(10s);
  EXPECT_TRUE(b_lease) << "B was not granted the expired lock";
  a.release(out.a_release);
  auto c_lease = c_lock->try_acquire();
  out.c_granted_while_b_holds = c_lease && b_lease.held() && b_lease.remaining() > 0ms;
  return out;
}

}  // namespace dlock::testing
