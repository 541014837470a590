// dlock file:// reader-writer lock and semaphore vs raw flock doing the minimal same, in the same
// run. Run:
//   file_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// The lock directory is /tmp/dlock-file-bench-<pid> (tmpfs or not: say which when reporting).
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "dlock/dlock.hpp"
#include "lock_file.hpp"
#include "shared_files.hpp"

namespace dlock {
void register_file(registry& r);
}

namespace {

namespace fs = std::filesystem;

const fs::path& bench_dir() {
  static const fs::path dir = [] {
    auto d = fs::path("/tmp") / ("dlock-file-bench-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::shared_ptr<dlock::backend> file_backend() {
  static const std::shared_ptr<dlock::backend> b = [] {
    static dlock::registry r;
    dlock::register_file(r);
    return r.open("file://" + bench_dir().string());
  }();
  return b;
}

// The minimal hand-written cycle on one file: open, flock(operation|LOCK_NB), close (the close
// drops the flock). What a program without dlock does for a shared or exclusive hold.
bool raw_cycle(const fs::path& file, int operation) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
  if (fd < 0) return false;
  const bool ok = ::flock(fd, operation | LOCK_NB) == 0;
  ::close(fd);
  return ok;
}

void raw_flock_shared(benchmark::State& state) {
  const auto file = bench_dir() / "raw-shared";
  for (auto _ : state)
    if (!raw_cycle(file, LOCK_SH)) state.SkipWithError("raw LOCK_SH failed");
}

// The same files and syscalls as dlock's read grant, by hand: the turnstile LOCK_SH, the counter
// LOCK_EX with its 64-byte read and write, the lock LOCK_SH; then the closes. What is left between
// this and dlock_read is the library (lease, name checks, the fstat checks against replaced files).
void raw_rw_protocol_read(benchmark::State& state) {
  const auto files = dlock::file::rw_files("raw-protocol");
  const auto path = [](const std::string& f) { return bench_dir() / f; };
  char bytes[64] = {};
  for (auto _ : state) {
    const int gate = ::open(path(files.gate).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
    const int fence = ::open(path(files.fence).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
    const int lock = ::open(path(files.lock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
    if (::flock(gate, LOCK_SH | LOCK_NB) != 0 || ::flock(fence, LOCK_EX) != 0 || ::flock(lock, LOCK_SH | LOCK_NB) != 0 ||
        ::pread(fence, bytes, 64, 0) < 0 || ::pwrite(fence, bytes, 64, 0) != 64)
      state.SkipWithError("raw protocol failed");
    ::close(fence);
    ::close(gate);
    ::close(lock);
  }
}

// One iteration = try_acquire_read + release on one name; with Threads(8), 8 readers of one name
// at once (each thread its own rw_lock object), whose holds overlap.
void dlock_read(benchmark::State& state) {
  auto rw = file_backend()->make_rw_lock("bench-read");
  for (auto _ : state) {
    auto l = rw->try_acquire_read();
    if (!l) state.SkipWithError("try_acquire_read failed");
    l.release();
  }
  state.SetItemsProcessed(state.iterations());
}

void raw_read_threads(benchmark::State& state) {
  const auto file = bench_dir() / "raw-shared-threads";
  for (auto _ : state)
    if (!raw_cycle(file, LOCK_SH)) state.SkipWithError("raw LOCK_SH failed");
  state.SetItemsProcessed(state.iterations());
}

void dlock_write(benchmark::State& state) {
  auto rw = file_backend()->make_rw_lock("bench-write");
  for (auto _ : state) {
    auto l = rw->try_acquire_write();
    if (!l) state.SkipWithError("try_acquire_write failed");
    l.release();
  }
}

// Raw semaphore of one permit taken: one slot file, LOCK_EX.
void raw_flock_slot(benchmark::State& state) {
  const auto file = bench_dir() / "raw-slot";
  for (auto _ : state)
    if (!raw_cycle(file, LOCK_EX)) state.SkipWithError("raw LOCK_EX failed");
}

// A semaphore of 4, one permit per acquire (the first slot is free every time).
void dlock_semaphore(benchmark::State& state) {
  auto sem = file_backend()->make_semaphore("bench-sem", 4);
  for (auto _ : state) {
    auto l = sem->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

// The mutex for reference: its counter is fdatasync'ed on every grant.
void dlock_mutex(benchmark::State& state) {
  auto lock = file_backend()->make_lock("bench-mutex");
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("try_acquire failed");
    l.release();
  }
}

}  // namespace

BENCHMARK(raw_flock_shared)->UseRealTime();
BENCHMARK(raw_rw_protocol_read)->UseRealTime();
BENCHMARK(dlock_read)->UseRealTime();
BENCHMARK(dlock_write)->UseRealTime();
BENCHMARK(raw_flock_slot)->UseRealTime();
BENCHMARK(dlock_semaphore)->UseRealTime();
BENCHMARK(dlock_mutex)->UseRealTime();
BENCHMARK(raw_read_threads)->Name("readers/raw")->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(dlock_read)->Name("readers/dlock")->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK_MAIN();
