#pragma once
// A holder cut off from the server by a partition (nothing delivered, nothing closed), shared by
// the PostgreSQL and MySQL backend tests of the schemes whose leases live on a server session.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <system_error>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"

namespace dlock::sql::testing {

// Takes a lock on `uri` (ttl=3s, its server reached through `proxy`), partitions the link, and
// expects the holder to be told while the link is still down: within ttl + 10 s, a margin on
// "while still partitioned", not a speed claim. Prints when it was told, under `label`. Returns
// the error of the lease's release once the link is back.
inline std::error_code release_after_a_partition(const std::string& uri, dlock::testing::tcp_proxy& proxy,
                                                 const std::string& label) {
  using namespace std::chrono_literals;
  auto b = dlock::open(uri);
  auto held = b->make_lock(dlock::testing::unique_name("partition"))->try_acquire();
  if (!held) {
    ADD_FAILURE() << "the lock was not granted before the partition";
    return {};
  }
  const auto cut = std::chrono::steady_clock::now();
  bool told_while_partitioned = false;
  std::chrono::steady_clock::duration told_after{};
  {
    dlock::testing::partition_guard partition(proxy);
    told_while_partitioned = dlock::testing::fires_within(held.lost_token(), 3s + 10s);
    told_after = std::chrono::steady_clock::now() - cut;
  }
  EXPECT_TRUE(told_while_partitioned) << "the holder was not told while the link was down (ttl 3s)";
  std::cout << "[ figures ] " << label << (told_while_partitioned ? ": told " : ": not told in ")
            << std::chrono::duration_cast<std::chrono::milliseconds>(told_after).count()
            << " ms after the cut (ttl 3s)\n";
  std::error_code ec;
  held.release(ec);
  return ec;
}

// Two leases of one backend on one shared session (`uri`: max_connections=3, ttl=3s, its server
// reached through `proxy`), cut off by a partition: both are told while the link is down, and
// each one's release returns without waiting on the silent link (a lost lease on a session that
// others hold locks on gives its lock back with a statement, and the session is shut down when
// that cannot finish within deadline_grace). The 5 s bound is a margin on "not command_timeout
// (30 s) or TCP's timeouts", not a speed claim.
inline void expect_partitioned_shared_leases_to_leave(const std::string& uri, dlock::testing::tcp_proxy& proxy) {
  using namespace std::chrono_literals;
  auto b = dlock::open(uri);
  auto first = b->make_lock(dlock::testing::unique_name("partition-a"))->try_acquire();
  auto second = b->make_lock(dlock::testing::unique_name("partition-b"))->try_acquire();
  ASSERT_TRUE(first && second);
  dlock::testing::partition_guard partition(proxy);
  EXPECT_TRUE(dlock::testing::fires_within(first.lost_token(), 3s + 10s)) << "the first holder was not told";
  EXPECT_TRUE(dlock::testing::fires_within(second.lost_token(), 3s + 10s)) << "the second holder was not told";
  for (auto* held : {&first, &second}) {
    const auto start = std::chrono::steady_clock::now();
    std::error_code ec;
    held->release(ec);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(ec == dlock::errc::not_owner || ec == dlock::errc::lock_lost) << ec.message();
    EXPECT_LT(took, 5s) << "a lost lease's release waited "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                        << " ms on the silent link";
  }
}

}  // namespace dlock::sql::testing
