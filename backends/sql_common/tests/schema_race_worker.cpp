// dlock_sql_race_worker URI NAME COUNTER_FILE ITERATIONS START_EPOCH_MS
// One of several processes started together by the SQL backends' schema-race tests: waits until
// the given wall-clock instant (so every process opens at the same moment), opens URI (a fresh
// table, create_table=true: every process runs the DDL at once), prints "opened", then does
// ITERATIONS lossy read-modify-writes of COUNTER_FILE under the lock NAME. Overlap detector:
// entering creates COUNTER_FILE.inside with O_CREAT|O_EXCL, leaving unlinks it; finding it already
// there means two holders at once. Exit: 0 done, 2 usage or dlock error, 3 overlap seen.
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"
#include "dlock_test/lossy_counter.hpp"

namespace {

int run(const std::string& uri, const std::string& name, const std::string& counter, int iterations,
        long long start_epoch_ms) {
  std::this_thread::sleep_until(std::chrono::system_clock::time_point{std::chrono::milliseconds{start_epoch_ms}});
  auto backend = dlock::open(uri);
  std::cout << "opened" << std::endl;
  auto lock = backend->make_lock(name);
  for (int i = 0; i < iterations; ++i) {
    auto held = lock->try_acquire_for(std::chrono::seconds{60});
    if (!held) {
      std::cerr << "no grant within 60s\n";
      return 2;
    }
    if (!dlock::testing::lossy_increment(counter, std::chrono::microseconds{500})) return 3;
    held.release();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: dlock_sql_race_worker URI NAME COUNTER_FILE ITERATIONS START_EPOCH_MS\n";
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3], std::stoi(argv[4]), std::stoll(argv[5]));
  } catch (const std::exception& e) {
    std::cerr << "dlock_sql_race_worker: " << e.what() << '\n';
    return 2;
  }
}
