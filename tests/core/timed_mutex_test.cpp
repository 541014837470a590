// dlock/detail/timed_mutex.hpp: the local timed mutexes of the adapters and the SQL sessions.
// Under the tsan preset these tests also check that ThreadSanitizer sees what they order.
#include "dlock/detail/timed_mutex.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST(timed_mutex, HeldItRefusesTriesAndTimesOut) {
  dlock::detail::timed_mutex m;
  m.lock();
  auto other = std::async(std::launch::async, [&] {
    return std::pair{m.try_lock(), m.try_lock_until(steady::now() + 50ms)};
  });
  const auto [tried, timed] = other.get();
  EXPECT_FALSE(tried) << "try_lock took a held mutex";
  EXPECT_FALSE(timed) << "try_lock_until took a held mutex";
  m.unlock();
  EXPECT_TRUE(m.try_lock_for(0ms)) << "a free mutex was refused";
  m.unlock();
}

TEST(timed_mutex, AWaiterGetsItWhenTheHolderUnlocksAndSeesItsWrites) {
  dlock::detail::timed_mutex m;
  int value = 0;  // plain: only the mutex orders the two threads' accesses
  std::promise<void> holding;
  m.lock();
  auto waiter = std::async(std::launch::async, [&] {
    holding.get_future().wait();
    if (!m.try_lock_until(steady::now() + 30s)) return -1;
    const int seen = value;
    m.unlock();
    return seen;
  });
  holding.set_value();
  value = 42;
  m.unlock();
  EXPECT_EQ(waiter.get(), 42) << "the waiter did not get the mutex, or not after the holder's write";
}

TEST(timed_mutex, ThreadsNeverHoldItTogether) {
  dlock::detail::timed_mutex m;
  int inside = 0, most = 0;
  long total = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::unique_lock lk(m, std::defer_lock);
        if (t % 2 == 0)
          lk.lock();
        else
          ASSERT_TRUE(lk.try_lock_for(30s));
        most = std::max(most, ++inside);
        ++total;
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(most, 1);
  EXPECT_EQ(total, 800);
}

TEST(shared_timed_mutex, ReadersShareAndExcludeAWriter) {
  dlock::detail::shared_timed_mutex m;
  m.lock_shared();
  auto other = std::async(std::launch::async, [&] {
    const bool shared = m.try_lock_shared_until(steady::now() + 30s);
    const bool write = m.try_lock() || m.try_lock_until(steady::now() + 50ms);
    if (shared) m.unlock_shared();
    return std::pair{shared, write};
  });
  const auto [shared, write] = other.get();
  EXPECT_TRUE(shared) << "a second reader was held out by the first";
  EXPECT_FALSE(write) << "a writer got in beside a reader";
  m.unlock_shared();
  EXPECT_TRUE(m.try_lock_for(0ms)) << "the last reader left, the writer was still refused";
  m.unlock();
}

TEST(shared_timed_mutex, AWriterExcludesReadersAndWritersUntilItUnlocks) {
  dlock::detail::shared_timed_mutex m;
  int value = 0;
  m.lock();
  auto refused = std::async(std::launch::async, [&] {
    return !m.try_lock_shared() && !m.try_lock_shared_for(50ms) && !m.try_lock() && !m.try_lock_for(50ms);
  });
  EXPECT_TRUE(refused.get()) << "a reader or a writer got in beside a writer";
  std::promise<void> waiting;
  auto reader = std::async(std::launch::async, [&] {
    waiting.set_value();
    if (!m.try_lock_shared_until(steady::now() + 30s)) return -1;
    const int seen = value;
    m.unlock_shared();
    return seen;
  });
  waiting.get_future().wait();
  value = 7;
  m.unlock();
  EXPECT_EQ(reader.get(), 7) << "the waiting reader did not get in, or not after the writer's write";
}

TEST(shared_timed_mutex, AWaitingWriterGetsInWhenTheLastReaderLeaves) {
  dlock::detail::shared_timed_mutex m;
  m.lock_shared();
  std::promise<void> writer_started;
  auto writer = std::async(std::launch::async, [&] {
    writer_started.set_value();
    const bool got = m.try_lock_until(steady::now() + 30s);
    if (got) m.unlock();
    return got;
  });
  writer_started.get_future().wait();
  // Readers are preferred: another reader still gets in while the writer waits (or before it does).
  const bool second_reader = m.try_lock_shared();
  EXPECT_TRUE(second_reader) << "a writer that does not hold it held a reader out";
  if (second_reader) m.unlock_shared();
  m.unlock_shared();
  EXPECT_TRUE(writer.get()) << "the writer was not let in when the last reader left";
}

}  // namespace
