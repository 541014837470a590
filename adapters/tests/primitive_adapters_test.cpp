// adapters/: shared_timed_lockable (std::shared_lock / std::unique_lock over a rw_lock),
// counting_semaphore (std::counting_semaphore's shape over a semaphore), with_read_lock /
// with_write_lock / with_permits, over the embedded backends; a backend that does not make the
// primitive (yet) is skipped, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

#include "dlock/counting_semaphore.hpp"
#include "dlock/dlock.hpp"
#include "dlock/shared_timed_lockable.hpp"
#include "dlock/with_lock.hpp"

using namespace std::chrono_literals;

namespace {

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "adapters/" + what + "/" + std::to_string(::getpid()) + "/" + std::to_string(n++);
}

// Collects what report_background_error says while it lives.
struct captured_errors {
  captured_errors() {
    previous = dlock::set_background_error_handler([this](std::error_code ec, std::string_view msg) {
      const std::lock_guard g(m);
      codes.push_back(ec);
      messages.emplace_back(msg);
    });
  }
  ~captured_errors() { dlock::set_background_error_handler(previous); }
  std::vector<std::error_code> all() {
    const std::lock_guard g(m);
    return codes;
  }
  std::string text() {
    const std::lock_guard g(m);
    std::string s;
    for (auto& msg : messages) s += msg + "\n";
    return s;
  }
  dlock::background_error_handler previous;
  std::mutex m;
  std::vector<std::error_code> codes;
  std::vector<std::string> messages;
};

// Waits (bounded) until `pred` holds; false when it never did.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds within = 10s) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class PrimitiveAdapters : public ::testing::TestWithParam<std::string> {
 protected:
  // Every backend these tests run on makes both primitives: one that does not is a failure here.
  void SetUp() override {
    backend_ = dlock::open(GetParam());
    ASSERT_TRUE(backend_->caps().has(dlock::capability::read_write)) << GetParam() << " makes no reader-writer lock";
    ASSERT_TRUE(backend_->caps().has(dlock::capability::semaphore)) << GetParam() << " makes no semaphore";
  }
  std::shared_ptr<dlock::backend> backend_;
};

TEST_P(PrimitiveAdapters, SharedLocksOfSeveralThreadsOverlap) {
  if (IsSkipped()) return;
  const auto name = unique("shared_overlap");
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(name));
  auto other = backend_->make_rw_lock(name);
  constexpr int readers = 4;
  std::atomic<int> inside{0};
  std::atomic<bool> all_in{false}, writer_got_in{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < readers; ++t)
    threads.emplace_back([&] {
      std::shared_lock reading(rw);
      ++inside;
      // Stay until every reader is in at once (or give up): readers that excluded each other
      // would never get there.
      if (eventually([&] { return inside.load() == readers; })) all_in = true;
      if (other->try_acquire_write()) writer_got_in = true;
      eventually([&] { return all_in.load(); }, 2s);
    });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(all_in) << "the readers of one shared_timed_lockable never held it together";
  EXPECT_FALSE(writer_got_in) << "another owner took the write side while std::shared_lock readers held it";
  EXPECT_TRUE(other->try_acquire_write()) << "the readers' leases were not released by ~shared_lock";
}

TEST_P(PrimitiveAdapters, UniqueLockWriterExcludesReadersAndWriters) {
  if (IsSkipped()) return;
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(unique("writer_excludes")));
  std::atomic<int> readers_inside{0}, writers_inside{0}, overlaps{0}, reads{0};
  int counter = 0;  // written under the write side only
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        std::unique_lock writing(rw);
        if (writers_inside++ != 0 || readers_inside.load() != 0) ++overlaps;
        const int read = counter;
        std::this_thread::sleep_for(200us);
        counter = read + 1;
        --writers_inside;
      }
    });
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        std::shared_lock reading(rw);
        ++readers_inside;
        if (writers_inside.load() != 0) ++overlaps;
        std::this_thread::sleep_for(200us);
        if (writers_inside.load() != 0) ++overlaps;
        --readers_inside;
        ++reads;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "a writer overlapped a reader or another writer";
  EXPECT_EQ(counter, 40);
  EXPECT_EQ(reads.load(), 60);
}

TEST_P(PrimitiveAdapters, UniqueLockExcludesAnotherOwnersReaders) {
  if (IsSkipped()) return;
  const auto name = unique("writer_other_owner");
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(name));
  auto other = backend_->make_rw_lock(name);
  {
    std::unique_lock writing(rw);
    ASSERT_TRUE(rw.current_lease().held());
    EXPECT_FALSE(other->try_acquire_read()) << "another owner read while std::unique_lock held the write side";
  }
  EXPECT_TRUE(other->try_acquire_read()) << "~unique_lock did not release the write side";
}

TEST_P(PrimitiveAdapters, TryLockSharedForTimesOutWhileAWriterHolds) {
  if (IsSkipped()) return;
  const auto name = unique("shared_timeout");
  auto holder = backend_->make_rw_lock(name);
  auto writing = holder->try_acquire_write();
  ASSERT_TRUE(writing);
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(name));
  std::shared_lock reading(rw, std::defer_lock);
  EXPECT_FALSE(reading.try_lock());
  const auto before = std::chrono::steady_clock::now();
  EXPECT_FALSE(reading.try_lock_for(100ms));
  EXPECT_GE(std::chrono::steady_clock::now() - before, 100ms) << "try_lock_shared_for gave up before its timeout";
  EXPECT_FALSE(reading.try_lock_until(std::chrono::system_clock::now() + 50ms));
  EXPECT_FALSE(rw.shared_fencing_token()) << "a failed try_lock_shared left a read lease behind";
  writing.release();
  ASSERT_TRUE(reading.try_lock_for(2s));
  if (backend_->rw_caps().has(dlock::capability::fencing)) {
    EXPECT_TRUE(rw.shared_fencing_token());
  }
  // ... and the writer side times out while this reader holds.
  auto writer = backend_->make_rw_lock(name);
  EXPECT_FALSE(writer->try_acquire_write_for(50ms));
}

TEST_P(PrimitiveAdapters, TryLockForTheWriteSideTimesOutWhileAnotherOwnerReads) {
  if (IsSkipped()) return;
  const auto name = unique("write_timeout");
  auto reading = backend_->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(reading);
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(name));
  std::unique_lock writing(rw, std::defer_lock);
  EXPECT_FALSE(writing.try_lock());
  EXPECT_FALSE(writing.try_lock_for(50ms));
  EXPECT_FALSE(writing.try_lock_until(std::chrono::system_clock::now() + 50ms));
  // The local side was given back: this process's readers are not held out by the failed writer.
  EXPECT_TRUE(rw.try_lock_shared());
  rw.unlock_shared();
  reading.release();
  EXPECT_TRUE(writing.try_lock_for(2s));
}

TEST_P(PrimitiveAdapters, UnlockSharedReleasesTheCallingThreadsOwnLease) {
  if (IsSkipped()) return;
  const auto name = unique("per_thread_lease");
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(name));
  auto writer = backend_->make_rw_lock(name);
  std::mutex m;
  std::condition_variable cv;
  int step = 0;  // 1: B holds; 2: A unlocked; 3: B unlocked
  auto wait_for = [&](int s) {
    std::unique_lock g(m);
    return cv.wait_for(g, 10s, [&] { return step >= s; });
  };
  auto advance = [&](int s) {
    const std::lock_guard g(m);
    step = s;
    cv.notify_all();
  };
  rw.lock_shared();  // thread A (this one)
  const auto token_a = rw.shared_fencing_token();
  std::optional<std::uint64_t> token_b, token_b_after;
  std::thread b([&] {
    rw.lock_shared();
    token_b = rw.shared_fencing_token();
    advance(1);
    wait_for(2);
    token_b_after = rw.shared_fencing_token();  // still B's own lease after A unlocked
    rw.unlock_shared();
    advance(3);
  });
  ASSERT_TRUE(wait_for(1));
  rw.unlock_shared();
  EXPECT_FALSE(rw.shared_fencing_token()) << "thread A still finds a read lease after its unlock_shared";
  EXPECT_FALSE(writer->try_acquire_write()) << "A's unlock_shared released B's read lease too";
  advance(2);
  ASSERT_TRUE(wait_for(3));
  b.join();
  EXPECT_EQ(token_b_after, token_b) << "B's read lease changed when A unlocked";
  if (backend_->rw_caps().has(dlock::capability::fencing)) {
    EXPECT_NE(token_a, token_b) << "A and B shared one lease";
  }
  EXPECT_TRUE(writer->try_acquire_write()) << "B's unlock_shared did not release its lease";
}

TEST_P(PrimitiveAdapters, UnlockWithoutHoldingIsReportedNotThrown) {
  if (IsSkipped()) return;
  dlock::shared_timed_lockable rw(backend_->make_rw_lock(unique("unlock_unheld")));
  captured_errors errors;
  rw.unlock_shared();
  rw.unlock();
  const auto codes = errors.all();
  ASSERT_EQ(codes.size(), 2u) << errors.text();
  EXPECT_EQ(codes[0], dlock::errc::invalid_argument);
  EXPECT_EQ(codes[1], dlock::errc::invalid_argument);
  EXPECT_TRUE(rw.try_lock()) << "a stray unlock_shared/unlock damaged the local side";
  rw.unlock();
}

TEST_P(PrimitiveAdapters, CountingSemaphoreLetsInAtMostMaxCountAndReachesIt) {
  if (IsSkipped()) return;
  constexpr int permits = 3;
  dlock::counting_semaphore slots(backend_->make_semaphore(unique("sem_bound"), permits));
  EXPECT_EQ(slots.max(), permits);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 7; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        slots.acquire();
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        // Stay until max_count holders were seen together once (bounded), so that the bound is
        // reached, not only respected.
        eventually([&] { return most.load() >= permits; }, 2s);
        std::this_thread::sleep_for(200us);
        --inside;
        slots.release();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), permits) << "more than max_count holders, or never max_count at once";
  EXPECT_EQ(slots.held_here(), 0u);
}

TEST_P(PrimitiveAdapters, CountingSemaphoreReleasesTheOldestPermitsFromAnyThread) {
  if (IsSkipped()) return;
  const auto name = unique("sem_fifo");
  dlock::counting_semaphore slots(backend_->make_semaphore(name, 2));
  auto other = backend_->make_semaphore(name, 2);
  std::thread([&] { slots.acquire(); }).join();
  const auto first = slots.oldest_fencing_token();
  std::thread([&] { EXPECT_TRUE(slots.try_acquire_for(1s)); }).join();
  EXPECT_EQ(slots.held_here(), 2u);
  EXPECT_FALSE(slots.try_acquire()) << "a third permit of two";
  EXPECT_FALSE(slots.try_acquire_for(50ms));
  EXPECT_FALSE(slots.try_acquire_until(std::chrono::system_clock::now() + 50ms));
  EXPECT_FALSE(other->try_acquire()) << "another owner got a permit while both were held";
  EXPECT_THROW(slots.release(3), dlock::error) << "released more than it holds";
  EXPECT_THROW(slots.release(-1), dlock::error);
  EXPECT_EQ(slots.held_here(), 2u) << "a refused release gave permits back";
  slots.release();  // the main thread gives back a permit that other threads took: the oldest
  if (backend_->semaphore_caps().has(dlock::capability::fencing)) {
    ASSERT_TRUE(first);
    ASSERT_TRUE(slots.oldest_fencing_token());
    EXPECT_GT(*slots.oldest_fencing_token(), *first) << "release() gave back a newer permit than the oldest";
  }
  EXPECT_TRUE(other->try_acquire()) << "release() did not give a permit back";
  slots.release(1);
  EXPECT_EQ(slots.held_here(), 0u);
}

TEST_P(PrimitiveAdapters, WithReadWriteLockAndWithPermits) {
  if (IsSkipped()) return;
  const auto name = unique("with_rw");
  auto a = backend_->make_rw_lock(name);
  auto b = backend_->make_rw_lock(name);
  // Two readers nest; the writer cannot get in while they hold, and the message names the side.
  const int r = dlock::with_read_lock(*a, 1s, [&](const dlock::lease& outer) {
    return dlock::with_read_lock(*b, 1s, [&] {
      try {
        dlock::with_write_lock(*backend_->make_rw_lock(name), 50ms, [] {});
        ADD_FAILURE() << "with_write_lock got in beside two readers";
      } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), dlock::errc::timeout);
        EXPECT_NE(std::string(e.what()).find("write side"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
      return outer.held() ? 7 : -1;
    });
  });
  EXPECT_EQ(r, 7);
  EXPECT_EQ(dlock::with_write_lock(*a, 1s, [] { return std::string("written"); }), "written");
  EXPECT_TRUE(b->try_acquire_write()) << "with_write_lock did not release";

  if (!backend_->caps().has(dlock::capability::semaphore)) return;
  auto sem = backend_->make_semaphore(unique("with_permits"), 3);
  auto taken = sem->try_acquire(2);
  ASSERT_TRUE(taken);
  try {
    dlock::with_permits(*sem, 2, 50ms, [] {});
    ADD_FAILURE() << "with_permits took 2 permits while 2 of 3 were held";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::timeout);
    EXPECT_NE(std::string(e.what()).find("2 of the 3 permits"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dlock::with_permits(*sem, 1, 1s, [] { return true; }));
  taken.release();
  EXPECT_TRUE(dlock::with_permits(*sem, 3, 1s, [] { return true; }));
  EXPECT_TRUE(sem->try_acquire(3)) << "with_permits did not give its permits back";
}

TEST_P(PrimitiveAdapters, WithLocksTakesTheWholeSetOrThrowsTimeout) {
  const auto a = unique("with_locks_a"), b = unique("with_locks_b");
  auto set = backend_->make_multi_lock({b, a});
  auto other = backend_->make_lock(b);
  auto taken = other->try_acquire();
  ASSERT_TRUE(taken);
  try {
    dlock::with_locks(*set, 50ms, [] {});
    ADD_FAILURE() << "with_locks took a set one of whose names was held";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::timeout);
    EXPECT_NE(std::string(e.what()).find("the set of locks '" + a + "', '" + b + "'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(backend_->make_lock(a)->try_acquire()) << "with_locks left a name of the set held after its timeout";
  taken.release();
  EXPECT_EQ(dlock::with_locks(*set, 1s, [](const dlock::multi_lease& held) { return held.members().size(); }), 2u);
  EXPECT_TRUE(set->try_acquire()) << "with_locks did not give the set back";
}

INSTANTIATE_TEST_SUITE_P(Embedded, PrimitiveAdapters,
                         ::testing::Values(std::string("memory://"),
                                           "file:///tmp/dlock-adapters-test-" + std::to_string(::getuid())),
                         [](const auto& info) { return info.param.substr(0, info.param.find(':')); });

// A read lease that expired under a std::shared_lock (no watchdog, short ttl): unlock_shared,
// called by ~shared_lock, must report not_owner rather than throw or stay silent; the same for
// the write side's unlock.
TEST(SharedTimedLockable, ReleaseAfterExpiryIsReportedAsNotOwner) {
  auto backend = dlock::open("memory://?ttl=200ms&watchdog=false");
  dlock::shared_timed_lockable rw(backend->make_rw_lock(unique("expired")));
  captured_errors errors;
  {
    std::shared_lock reading(rw);
    std::this_thread::sleep_for(400ms);
  }
  {
    std::unique_lock writing(rw);
    std::this_thread::sleep_for(400ms);
  }
  const auto codes = errors.all();
  ASSERT_GE(codes.size(), 2u) << errors.text();
  EXPECT_TRUE(std::count(codes.begin(), codes.end(), dlock::make_error_code(dlock::errc::not_owner)) >= 2)
      << errors.text();
  EXPECT_TRUE(rw.try_lock()) << "the local side was not given back after the failed release";
  rw.unlock();
}

}  // namespace
