#pragma once
// Many threads of one process on one lock name, through one backend whose leases share server
// sessions (postgres+advisory, mysql+getlock). A session that holds a name is granted it again, so
// only the backend's local key guard keeps two leases of one process apart: a read-modify-write
// counter that loses updates, and an overlap detector, show whether it does. Shared by the
// PostgreSQL and MySQL backend tests.
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::sql::testing {

struct hammer_result {
  int overlaps = 0;       // a thread entered while another was inside
  int errors = 0;         // an acquire or release threw
  long counter = 0;       // incremented once per round, protected only by the lock
  long expected = 0;      // what counter must be: rounds that did not throw
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

}  // namespace dlock::sql::testing
