#pragma once
// The FIFO property of the index strategy's fair=true mode (a waiters table on the server),
// shared by the PostgreSQL and MySQL backend tests: each gives its own probe of the table.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::sql::testing {

// Holds `name`, starts `waiters` threads one at a time (the next only once the server's table
// shows this one queued, so arrival order is the thread's number), checks that a newcomer's plain
// try does not barge past the queue, releases, and returns the order in which the waiters were
// granted. `queued()` counts the name's live rows in the waiters table.
inline std::vector<int> grant_order_of_queued_waiters(dlock::backend& b, const std::string& name, int waiters,
                                                      const std::function<std::int64_t()>& queued) {
  using namespace std::chrono_literals;
  auto held = b.make_lock(name)->try_acquire();
  EXPECT_TRUE(held) << "the lock was not free at the start";
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      auto got = b.make_lock(name)->try_acquire_for(60s);
      if (!got) return;
      std::lock_guard g(m);
      order.push_back(i);
    });
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (queued() != i + 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_EQ(queued(), i + 1) << "waiter " << i << " never queued";
  }
  // Even the instant the lock is free, a plain try may not pass the queue.
  EXPECT_FALSE(b.make_lock(name)->try_acquire()) << "a newcomer barged past the queue";
  held.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(queued(), 0) << "granted waiters must leave the waiters table";
  return order;
}

}  // namespace dlock::sql::testing
