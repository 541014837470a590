#pragma once
// Workloads for backends whose leases share server sessions (postgres+advisory, mysql+getlock),
// shared by the PostgreSQL and MySQL backend tests.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"

namespace dlock::sql::testing {

// Many threads of one process on one lock name. A session that holds a name is granted it again,
// so only the backend's local key guard keeps two leases of one process apart: a read-modify-write
// counter that loses updates, and an overlap detector, show whether it does.
struct hammer_result {
  int overlaps = 0;   // a thread entered while another was inside
  int errors = 0;     // an acquire or release threw
  long counter = 0;   // incremented once per round, protected only by the lock
  long expected = 0;  // what counter must be: rounds that did not throw
};

// Odd threads use try_acquire (retrying after 1 ms), even ones try_acquire_for(30 s), so both
// paths (try on a shared session; wait on a session of one's own) meet on the name. Each thread
// also holds a name of its own the whole time, which keeps the shared sessions busy.
inline hammer_result hammer_one_name(dlock::backend& b, const std::string& name, int threads_n, int rounds) {
  using namespace std::chrono_literals;
  std::atomic<int> inside{0}, overlaps{0}, errors{0};
  long counter = 0;  // plain: only the lock protects it
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&, t] {
      auto lock = b.make_lock(name);
      auto side = b.make_lock(name + "-side-" + std::to_string(t))->try_acquire();
      for (int r = 0; r < rounds;) {
        try {
          auto held = (t % 2) ? lock->try_acquire() : lock->try_acquire_for(30s);
          if (!held) {
            std::this_thread::sleep_for(1ms);
            continue;
          }
          if (inside.fetch_add(1) != 0) overlaps++;
          const long seen = counter;
          std::this_thread::yield();
          counter = seen + 1;
          inside.fetch_sub(1);
          held.release();
          ++r;
        } catch (const std::exception&) {
          errors++;
          ++r;
        }
      }
      if (side) side.release();
    });
  }
  for (auto& t : threads) t.join();
  return {overlaps.load(), errors.load(), counter, long{threads_n} * rounds - errors.load()};
}

struct hold_result {
  int granted = 0;
  int failed = 0;
};

// One thread per name, each acquiring its name (try_acquire_for 30 s) and holding it until every
// thread has its answer; `while_all_held` runs then (to count the server sessions behind them),
// before any is released.
inline hold_result hold_all_at_once(dlock::backend& b, const std::vector<std::string>& names,
                                    const std::function<void()>& while_all_held) {
  using namespace std::chrono_literals;
  std::mutex m;
  std::condition_variable cv;
  hold_result result;
  bool done = false;
  std::vector<std::thread> threads;
  for (const auto& name : names) {
    threads.emplace_back([&] {
      dlock::lease held;
      try {
        held = b.make_lock(name)->try_acquire_for(30s);
      } catch (const std::exception&) {
      }
      std::unique_lock lk(m);
      (held ? result.granted : result.failed)++;
      cv.notify_all();
      cv.wait(lk, [&] { return done; });
      lk.unlock();
      if (held) held.release();
    });
  }
  {
    std::unique_lock lk(m);
    cv.wait_for(lk, 60s, [&] { return result.granted + result.failed == static_cast<int>(names.size()); });
  }
  std::exception_ptr failure;
  try {
    while_all_held();
  } catch (...) {
    failure = std::current_exception();  // rethrown once the holders let go (never a hang)
  }
  {
    std::lock_guard lk(m);
    done = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return result;
}

// The leases pool_bound_holds_its_deadline leaves held.
struct full_pool {
  dlock::lease held, shared;  // two holders of `b` on its one session
  dlock::lease elsewhere;     // the holder, on the other backend, of the contended name
  std::string contended;
};

// `b` is opened with max_connections=2 (max_dedicated=1) and checkout_timeout=600ms; `other` is
// another backend (another process, as the server sees it). A second holder of `b` shares the
// first one's session; a caller of `b` that must wait on a session of its own (its name is held
// on `other`) waits for one until its own deadline (800 ms), not checkout_timeout, then fails
// with backend_unavailable naming max_dedicated=1.
inline full_pool pool_bound_holds_its_deadline(dlock::backend& b, dlock::backend& other) {
  using namespace std::chrono_literals;
  full_pool p;
  p.held = b.make_lock(dlock::testing::unique_name("full-a"))->try_acquire();
  if (!p.held) {
    ADD_FAILURE() << "the first holder was not granted";
    return p;
  }
  p.shared = b.make_lock(dlock::testing::unique_name("full-b"))->try_acquire();
  EXPECT_TRUE(p.shared) << "a second holder did not share the only session";
  p.contended = dlock::testing::unique_name("full-c");
  p.elsewhere = other.make_lock(p.contended)->try_acquire();
  if (!p.elsewhere) {
    ADD_FAILURE() << "the other backend was not granted the contended name";
    return p;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    auto none = b.make_lock(p.contended)->try_acquire_for(800ms);
    ADD_FAILURE() << "a waiter got a session of its own beyond max_dedicated=1";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_dedicated=1"), std::string::npos) << e.what();
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 750ms) << "gave up before the caller's deadline";
  EXPECT_LT(waited, 5s) << "waited far past the caller's deadline";
  return p;
}

// Four locks of `b`, on names of their own, each granted at once (`names`, `leases`): with
// max_connections=3 they share one server session, which a test then ends on the server.
inline void hold_four_names(dlock::backend& b, std::vector<std::string>& names, std::vector<dlock::lease>& leases) {
  for (int i = 0; i < 4; ++i) {
    names.push_back(dlock::testing::unique_name("shared-kill-" + std::to_string(i)));
    leases.push_back(b.make_lock(names.back())->try_acquire());
    ASSERT_TRUE(leases.back());
  }
}

// The session behind `leases` was ended on the server: each lease is told within `bound`, its
// release says not_owner, and its name (names[i]) is free again.
inline void expect_each_lease_lost_and_its_name_free(dlock::backend& b, const std::vector<std::string>& names,
                                                     std::vector<dlock::lease>& leases,
                                                     std::chrono::milliseconds bound) {
  for (std::size_t i = 0; i < leases.size(); ++i)
    EXPECT_TRUE(dlock::testing::fires_within(leases[i].lost_token(), bound))
        << "lease " << i << " on the ended session was not told";
  for (std::size_t i = 0; i < leases.size(); ++i) {
    std::error_code ec;
    leases[i].release(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner) << i;
    EXPECT_TRUE(b.make_lock(names[i])->try_acquire()) << "the ended session's lock " << i << " was not free";
  }
}

// A lease lost because its ttl ran out (its lock's watchdog off), on a session another lease of
// `b` holds a lock on: the session lives on for the other lease, whose lock stays held on the
// server (it is not lost), and the lapsed lease's own lock is given back there. `session_of(name)`:
// the server's id of the session holding `name`, nullopt when nobody holds it.
template <class SessionOf>
void expect_a_lapsed_lease_to_leave_its_session_to_the_others(dlock::backend& b, SessionOf session_of) {
  using namespace std::chrono_literals;
  const auto staying = dlock::testing::unique_name("stays"), lapsing = dlock::testing::unique_name("lapses");
  lock_options stay_options;
  stay_options.ttl = 10s;
  lock_options lapse_options;
  lapse_options.ttl = 1s;
  lapse_options.watchdog = false;
  auto stays = b.make_lock(staying, stay_options)->try_acquire();
  auto lapses = b.make_lock(lapsing, lapse_options)->try_acquire();
  ASSERT_TRUE(stays && lapses);
  const auto session = session_of(staying);
  ASSERT_TRUE(session);
  ASSERT_EQ(session_of(lapsing), session) << "the two leases were expected on one shared session";

  ASSERT_TRUE(dlock::testing::fires_within(lapses.lost_token(), 5s)) << "the lapsed lease was not told";
  // Monitor ticks (100 ms) on, and past the 1 s bound of the lapsed lease's give-back: the
  // staying lock is still its session's on the server.
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(session_of(staying), session)
        << "the staying lease's lock went with its session, " << i * 100 << " ms after the other lease lapsed";
    EXPECT_FALSE(stays.lost_token().stop_requested()) << "the staying lease was lost";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(dlock::testing::eventually([&] { return !session_of(lapsing); }, 5s))
      << "the lapsed lease's lock is still held on the server";
  std::error_code ec;
  lapses.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner) << ec.message();
  EXPECT_NO_THROW(stays.release());
  EXPECT_TRUE(b.make_lock(staying)->try_acquire()) << "the staying lock was not given back";
}

}  // namespace dlock::sql::testing
