#include <atomic>
#include <filesystem>
#include <fstream>
#include <vector>

#include "conformance_test.hpp"
#include "dlock_test/high_water.hpp"

namespace dlock::conformance {

TEST_P(Lock, MutualExclusionAcrossThreads) {
  constexpr int threads = 8, iterations = 20;
  const auto name = dlock::testing::unique_name("mutex-threads");
  std::atomic<int> counter{0}, inside{0}, max_inside{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> spawned;
  for (int t = 0; t < threads; ++t)
    spawned.emplace_back([&] {
      try {
        auto lock = make(name);
        for (int i = 0; i < iterations; ++i) {
          auto held = lock->acquire();
          dlock::testing::raise_to(max_inside, ++inside);
          const int v = counter.load(std::memory_order_relaxed);  // lossy on purpose
          std::this_thread::sleep_for(20us);
          counter.store(v + 1, std::memory_order_relaxed);
          --inside;
          held.release();
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& s : spawned) s.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(max_inside.load(), 1) << "two threads were inside the lock at once";
  EXPECT_EQ(counter.load(), threads * iterations) << "lost updates: the lock did not exclude";
}

TEST_P(Lock, MutualExclusionAcrossProcesses) {
  const auto name = dlock::testing::unique_name("mutex-procs");
  if (backend_->scope() == lock_scope::process) {
    // The negative: a process-scoped lock does NOT exclude another process.
    dlock::testing::child_process a({DLOCK_CONFORMANCE_WORKER, "hold", uri_, name});
    dlock::testing::child_process b({DLOCK_CONFORMANCE_WORKER, "hold", uri_, name});
    const auto la = a.read_line(10s), lb = b.read_line(10s);
    ASSERT_TRUE(la && la->starts_with("acquired")) << "first worker did not acquire";
    EXPECT_TRUE(lb && lb->starts_with("acquired")) << "a process-scoped lock excluded another process";
    return;
  }
  constexpr int processes = 4, iterations = 15;
  const auto dir = std::filesystem::temp_directory_path() / dlock::testing::unique_name("dlock-rmw");
  std::filesystem::create_directories(dir);
  const auto counter = (dir / "counter").string();
  { std::ofstream(counter) << 0 << '\n'; }
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (int p = 0; p < processes; ++p)
    children.push_back(std::make_unique<dlock::testing::child_process>(
        std::vector<std::string>{DLOCK_CONFORMANCE_WORKER, "rmw", uri_, name, counter, std::to_string(iterations)}));
  ASSERT_NO_FATAL_FAILURE(
      expect_workers_succeed(children, 90s, "a worker saw another holder inside the lock (overlap)"));
  long total = 0;
  std::ifstream(counter) >> total;
  EXPECT_EQ(total, processes * iterations) << "lost updates between processes";
  std::filesystem::remove_all(dir);
}

}  // namespace dlock::conformance
