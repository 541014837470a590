// dlock file:// reader-writer lock and semaphore vs raw flock doing the minimal same, in the same
// run. Run:
//   file_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// The lock directory is /tmp/dlock-file-bench-<pid> (tmpfs or not: say which when reporting).
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

// Made at first use, removed at exit (constructed before the backend that uses it, so destroyed
// after it).
class scratch_dir {
 public:
  scratch_dir() : path_(fs::path("/tmp") / ("dlock-file-bench-" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const noexcept { return path_; }

 private:
  fs::path path_;
};

const fs::path& bench_dir() {
  static const scratch_dir dir;
  return dir.path();
}

std::shared_ptr<dlock::backend> file_backend() {
  static const std::shared_ptr<dlock::backend> b = [] {
    static dlock::registry r;
    dlock::register_file(r);
    return r.open("file://" + bench_dir().string());
  }();
  return b;
}

// The lock directory, opened once (as dlock's lock_directory): files are found relative to it.
int file_backend_dir_fd() {
  static const int fd = ::open(bench_dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd;
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

// The files of a grant by hand, with the system calls dlock makes (strace -f: the same list, in
// the same order, per cycle). `open_locked` is one file's open + flock, then the check that the
// name still refers to the inode locked (fstat + fstatat: a file replaced or deleted between the
// open and the flock is locked by nobody else, so a client that skipped this could share an
// "exclusive" grant); `still_ours` is the release's check (not_owner when replaced while held).
int open_locked(const std::string& name, int operation) {
  const int dir = file_backend_dir_fd();
  const int fd = ::openat(dir, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
  struct stat locked {
  }, by_name{};
  if (fd < 0 || ::flock(fd, operation) != 0 || ::fstat(fd, &locked) != 0 ||
      ::fstatat(dir, name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0 || by_name.st_ino != locked.st_ino) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool still_ours(const std::string& name) {
  struct stat by_name {};
  return ::fstatat(file_backend_dir_fd(), name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) == 0;
}

// A file kept open across grants (dlock's kept_file: the readers' turn, the semaphore's counter):
// opened and fstat'ed once; per use flock, the name checked against that inode, LOCK_UN.
struct kept {
  std::string name;
  int fd;
  ino_t inode;
  explicit kept(std::string n)
      : name(std::move(n)),
        fd(::openat(file_backend_dir_fd(), name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660)) {
    struct stat st {};
    ::fstat(fd, &st);
    inode = st.st_ino;
  }
  ~kept() { ::close(fd); }
  bool lock(int operation) const {
    struct stat by_name {};
    return ::flock(fd, operation) == 0 &&
           ::fstatat(file_backend_dir_fd(), name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) == 0 &&
           by_name.st_ino == inode;
  }
  void unlock() const { ::flock(fd, LOCK_UN); }
};

// A file looked at without being created (the turnstile nobody ever waited at, the semaphore's
// presence file of a name never used as one, the lock file of a name never locked): one openat
// that fails with ENOENT.
bool missing(const std::string& name) {
  const int fd = ::openat(file_backend_dir_fd(), name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) ::close(fd);
  return fd < 0;
}

// dlock's read grant by hand (name_lock.hpp): the turnstile looked for (missing: no writer or
// mutex ever waited), the lock file LOCK_SH on a file opened for the grant, the readers' turn
// LOCK_EX (kept open), the semaphore's presence file looked for (missing: no semaphore of the
// name), the counter's 64-byte pread and pwrite in the lock file, the turn's LOCK_UN; each flock
// with the inode check; the release's check and close. What is left between this and dlock_read
// is the library alone.
void raw_rw_protocol_read(benchmark::State& state) {
  const auto files = dlock::file::rw_files("raw-protocol");
  const auto presence = dlock::file::semaphore_files("raw-protocol").held;
  const kept turn(files.turn);
  char bytes[64] = {};
  for (auto _ : state) {
    const int lock = missing(files.gate) ? open_locked(files.lock, LOCK_SH | LOCK_NB) : -1;
    if (lock < 0 || !turn.lock(LOCK_EX) || !missing(presence) || ::pread(lock, bytes, 64, 0) < 0 ||
        ::pwrite(lock, bytes, 64, 0) != 64)
      state.SkipWithError("raw protocol failed");
    turn.unlock();
    if (!still_ours(files.lock)) state.SkipWithError("raw lock replaced");
    ::close(lock);
  }
}

// The lock file and the turn without the inode checks and without looking for the turnstile and
// the semaphore: the floor of a client that trusts nobody to delete or replace files in the lock
// directory and knows no writer waits and no semaphore shares the name.
void raw_rw_protocol_read_unchecked(benchmark::State& state) {
  const auto files = dlock::file::rw_files("raw-protocol");
  const auto path = [](const std::string& f) { return bench_dir() / f; };
  char bytes[64] = {};
  for (auto _ : state) {
    const int turn = ::open(path(files.turn).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
    const int lock = ::open(path(files.lock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0660);
    if (::flock(lock, LOCK_SH | LOCK_NB) != 0 || ::flock(turn, LOCK_EX) != 0 || ::pread(lock, bytes, 64, 0) < 0 ||
        ::pwrite(lock, bytes, 64, 0) != 64)
      state.SkipWithError("raw protocol failed");
    ::close(turn);
    ::close(lock);
  }
}

// dlock's semaphore grant of one permit by hand: the counter file (kept open) LOCK_EX around the
// attempt, its 64-byte pread, the first slot LOCK_EX|LOCK_NB and the presence file LOCK_SH|LOCK_NB
// on files opened for the grant, the name's lock file looked for (missing: the name was never
// locked), the counter's pwrite and LOCK_UN; the release's checks and closes.
void raw_semaphore_protocol(benchmark::State& state) {
  const auto files = dlock::file::semaphore_files("raw-sem");
  const auto lock_file = dlock::file::lock_file_name("raw-sem");
  const auto slot_name = files.slot(0);
  const kept meta(files.meta);
  char bytes[64] = {};
  for (auto _ : state) {
    const int slot =
        !meta.lock(LOCK_EX) || ::pread(meta.fd, bytes, 64, 0) < 0 ? -1 : open_locked(slot_name, LOCK_EX | LOCK_NB);
    const int held = slot < 0 ? -1 : open_locked(files.held, LOCK_SH | LOCK_NB);
    if (held < 0 || !missing(lock_file) || ::pwrite(meta.fd, bytes, 64, 0) != 64)
      state.SkipWithError("raw semaphore failed");
    meta.unlock();
    if (!still_ours(slot_name) || !still_ours(files.held)) state.SkipWithError("raw slot replaced");
    ::close(slot);
    ::close(held);
  }
}

// One dlock cycle: the lease a try-acquire returned (none: `refused` stops the benchmark), then its
// release.
void dlock_cycle(benchmark::State& state, dlock::lease l, const char* refused) {
  if (!l) state.SkipWithError(refused);
  l.release();
}

// One iteration = try_acquire_read + release on one name; with Threads(8), 8 readers of one name
// at once (each thread its own rw_lock object), whose holds overlap.
void dlock_read(benchmark::State& state) {
  auto rw = file_backend()->make_rw_lock("bench-read");
  for (auto _ : state) dlock_cycle(state, rw->try_acquire_read(), "try_acquire_read failed");
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
  for (auto _ : state) dlock_cycle(state, rw->try_acquire_write(), "try_acquire_write failed");
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
  for (auto _ : state) dlock_cycle(state, sem->try_acquire(), "try_acquire failed");
}

// The mutex for reference: its counter is fdatasync'ed on every grant (name_lock.hpp).
void dlock_mutex(benchmark::State& state) {
  auto lock = file_backend()->make_lock("bench-mutex");
  for (auto _ : state) dlock_cycle(state, lock->try_acquire(), "try_acquire failed");
}

}  // namespace

BENCHMARK(raw_flock_shared)->UseRealTime();
BENCHMARK(raw_rw_protocol_read)->UseRealTime();
BENCHMARK(raw_rw_protocol_read_unchecked)->UseRealTime();
BENCHMARK(dlock_read)->UseRealTime();
BENCHMARK(dlock_write)->UseRealTime();
BENCHMARK(raw_flock_slot)->UseRealTime();
BENCHMARK(raw_semaphore_protocol)->UseRealTime();
BENCHMARK(dlock_semaphore)->UseRealTime();
BENCHMARK(dlock_mutex)->UseRealTime();
BENCHMARK(raw_read_threads)->Name("readers/raw")->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(dlock_read)->Name("readers/dlock")->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK_MAIN();
