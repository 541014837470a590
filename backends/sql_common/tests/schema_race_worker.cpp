// dlock_sql_race_worker URI NAME COUNTER_FILE ITERATIONS START_EPOCH_MS
// One of several processes started together by the SQL backends' schema-race tests: waits until
// the given wall-clock instant (so every process opens at the same moment), opens URI (a fresh
// table, create_table=true: every process runs the DDL at once), prints "opened", then does
// ITERATIONS lossy read-modify-writes of COUNTER_FILE under the lock NAME. Overlap detector:
// entering creates COUNTER_FILE.inside with O_CREAT|O_EXCL, leaving unlinks it; finding it already
// there means two holders at once. Exit: 0 done, 2 usage or dlock error, 3 overlap seen.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"

namespace {

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

int run(const std::string& uri, const std::string& name, const std::string& counter, int iterations,
        long long start_epoch_ms) {
  std::this_thread::sleep_until(std::chrono::system_clock::time_point{std::chrono::milliseconds{start_epoch_ms}});
  auto backend = dlock::open(uri);
  std::cout << "opened" << std::endl;
  auto lock = backend->make_lock(name);
  const std::string marker = counter + ".inside";
  for (int i = 0; i < iterations; ++i) {
    auto held = lock->try_acquire_for(std::chrono::seconds{60});
    if (!held) {
      std::cerr << "no grant within 60s\n";
      return 2;
    }
    const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) {
      std::cerr << "overlap: " << marker << " already exists (errno " << errno << ")\n";
      return 3;
    }
    ::close(fd);
    const long v = read_counter(counter);
    std::this_thread::sleep_for(std::chrono::microseconds{500});  // widen the race window
    std::ofstream(counter, std::ios::trunc) << v + 1 << '\n';
    ::unlink(marker.c_str());
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
