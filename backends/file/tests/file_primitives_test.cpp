// file://'s reader-writer lock and semaphore across processes (fork): readers together, a writer
// alone, a SIGKILLed holder's flocks freed by the kernel, writer preference through the turnstile,
// a semaphore of N never holding N+1 and reaching N, its stored max_count, fencing tokens, and
// the file names of the primitives never meeting a mutex's.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/fork_child.hpp"
#include "dlock_test/signal_pipe.hpp"
#include "lock_file.hpp"
#include "shared_files.hpp"

namespace dlock {
void register_file(registry& r);
}

namespace {

using dlock::testing::signal_pipe;
using dlock::testing::wait_exit_code;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::shared_ptr<dlock::backend> open_file(const std::string& uri) {
  static dlock::registry* r = [] {
    auto* reg = new dlock::registry();
    dlock::register_file(*reg);
    return reg;
  }();
  return r->open(uri);
}

// Counters in memory shared with forked children: how many hold now, and the most ever at once.
struct shared_counters {
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> failures{0};
};

class FilePrimitives : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path("/tmp") / ("dlock-file-prim-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    uri_ = "file://" + dir_.string() + "?poll=1ms..20ms";
    backend_ = open_file(uri_);
    void* mem = ::mmap(nullptr, sizeof(shared_counters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    counters_ = new (mem) shared_counters();
  }
  void TearDown() override {
    ::munmap(counters_, sizeof(shared_counters));
    fs::remove_all(dir_);
  }

  // A child that runs `body` with its own backend, after the parent forked it; returns its pid.
  // The child reports on `pipe_w` with one byte when told to by the body.
  template <class F>
  pid_t spawn(F body) {
    return dlock::testing::fork_child([&] { return body(open_file(uri_)); });
  }

  // A child, with a backend of its own, that takes a grant with `take(backend)` and holds it: until
  // `go` is said to it where given (then it exits 0, the grant let go), else until it is killed.
  // Returned once the child has said whether it holds the grant.
  struct holding_child {
    pid_t pid;
    bool holds;
  };
  template <class Take>
  holding_child spawn_holder(Take take, signal_pipe* go = nullptr) {
    signal_pipe held;
    const pid_t pid = spawn([&](auto b) {
      auto grant = take(*b);
      held.say(grant ? 'y' : 'n');
      if (go)
        go->hear();
      else
        ::pause();
      return 0;
    });
    return {pid, held.hear() == 'y'};
  }

  // Is the file `name` of the lock directory flock'ed exclusively by someone (a LOCK_SH probe fails)?
  bool exclusively_locked(const std::string& file_name) const {
    const auto path = dir_ / file_name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
    ::close(fd);
    return held;
  }

  // Waits (2 s at most) until someone holds the turnstile of reader-writer lock `name` exclusively,
  // as a waiting writer or mutex does; whether someone does.
  bool turnstile_taken(const std::string& name) const {
    const auto gate = dlock::file::rw_files(name).gate;
    for (int i = 0; i < 2000 && !exclusively_locked(gate); ++i) std::this_thread::sleep_for(1ms);
    return exclusively_locked(gate);
  }

  fs::path dir_;
  std::string uri_;
  std::shared_ptr<dlock::backend> backend_;
  shared_counters* counters_ = nullptr;
};

TEST_F(FilePrimitives, DeclaresTheRwLockAndSemaphoreCapabilities) {
  using dlock::capability;
  EXPECT_TRUE(backend_->caps().has(capability::read_write));
  EXPECT_TRUE(backend_->caps().has(capability::semaphore));
  EXPECT_TRUE(backend_->caps().has(capability::writer_preferred));
  EXPECT_EQ(backend_->rw_caps(),
            (dlock::capabilities{capability::expiring, capability::fencing, capability::writer_preferred}));
  EXPECT_EQ(backend_->semaphore_caps(), (dlock::capabilities{capability::expiring, capability::fencing}));
}

TEST_F(FilePrimitives, ReadersShareAcrossProcessesAndExcludeAWriter) {
  const auto child = spawn_holder([](dlock::backend& b) { return b.make_rw_lock("catalog")->try_acquire_read(); });
  ASSERT_TRUE(child.holds);
  auto rw = backend_->make_rw_lock("catalog");
  auto mine = rw->try_acquire_read();
  EXPECT_TRUE(mine) << "a second reader in another process shares the lock";
  EXPECT_FALSE(rw->try_acquire_write()) << "a writer is excluded while readers hold";
  mine.release();
  EXPECT_FALSE(rw->try_acquire_write()) << "the other process's reader still holds";
  ::kill(child.pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(child.pid), 128 + SIGKILL);
  EXPECT_TRUE(rw->try_acquire_write()) << "the kernel dropped the dead reader's LOCK_SH";
}

TEST_F(FilePrimitives, AWriterExcludesReadersAndWritersOfOtherProcessesUntilKilled) {
  const auto child = spawn_holder([](dlock::backend& b) { return b.make_rw_lock("catalog")->try_acquire_write(); });
  ASSERT_TRUE(child.holds);
  auto rw = backend_->make_rw_lock("catalog");
  EXPECT_FALSE(rw->try_acquire_read());
  EXPECT_FALSE(rw->try_acquire_write());
  EXPECT_FALSE(rw->try_acquire_read_for(50ms));
  ::kill(child.pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(child.pid), 128 + SIGKILL);
  EXPECT_TRUE(rw->try_acquire_read_for(2s)) << "the kernel dropped the dead writer's LOCK_EX";
}

TEST_F(FilePrimitives, ReadersAndWritersOfManyProcessesNeverOverlapWrongly) {
  // counters_->holding: +1 per reader, +1000 per writer. A writer must see exactly 1000, a reader
  // below 1000; most = the most readers at once (they must overlap at least once).
  constexpr int processes = 4, rounds = 25;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(spawn([&, p](auto b) {
      auto rw = b->make_rw_lock("mixed");
      for (int i = 0; i < rounds; ++i) {
        const bool write = (i + p) % 5 == 0;
        auto held = write ? rw->acquire_write() : rw->acquire_read();
        const int now = counters_->holding.fetch_add(write ? 1000 : 1) + (write ? 1000 : 1);
        if (write ? now != 1000 : now >= 1000) counters_->failures.fetch_add(1);
        if (!write) {
          int seen = counters_->most.load();
          while (now > seen && !counters_->most.compare_exchange_weak(seen, now)) {
          }
        }
        std::this_thread::sleep_for(2ms);
        counters_->holding.fetch_sub(write ? 1000 : 1);
      }
      return 0;
    }));
  }
  for (pid_t c : children) EXPECT_EQ(wait_exit_code(c), 0);
  EXPECT_EQ(counters_->failures.load(), 0) << "a writer overlapped someone, or a reader overlapped a writer";
  EXPECT_GE(counters_->most.load(), 2) << "readers of different processes never held together";
}

TEST_F(FilePrimitives, AWaitingWriterHoldsBackNewReadersOfOtherProcesses) {
  signal_pipe reader_go, writer_done;
  const auto reader =
      spawn_holder([](dlock::backend& b) { return b.make_rw_lock("pref")->try_acquire_read(); }, &reader_go);
  ASSERT_TRUE(reader.holds);
  auto rw = backend_->make_rw_lock("pref");
  {
    auto before = rw->try_acquire_read();
    EXPECT_TRUE(before) << "without a waiting writer, readers share";
  }
  const pid_t writer = spawn([&](auto b) {
    auto writing = b->make_rw_lock("pref")->try_acquire_write_for(20s);
    writer_done.say(writing ? 'w' : 'n');
    return 0;
  });
  // The writer waits once it holds the turnstile.
  ASSERT_TRUE(turnstile_taken("pref")) << "the writer never started waiting";
  EXPECT_FALSE(rw->try_acquire_read()) << "a reader arriving while a writer waits must not get in before it";
  EXPECT_FALSE(rw->try_acquire_read_for(100ms));
  reader_go.say('g');
  EXPECT_EQ(writer_done.hear(), 'w') << "the writer gets the lock once the readers before it leave";
  EXPECT_EQ(wait_exit_code(reader.pid), 0);
  EXPECT_EQ(wait_exit_code(writer), 0);
  EXPECT_TRUE(rw->try_acquire_read());
}

TEST_F(FilePrimitives, AStreamOfOverlappingReadersOfOtherProcessesDoesNotStarveAWriter) {
  // Four processes read in a loop, each hold overlapping the next, so the lock itself is never
  // free: with Linux flock alone a LOCK_EX would wait for ever. The turnstile lets the writer in.
  std::vector<pid_t> readers;
  for (int p = 0; p < 4; ++p) {
    readers.push_back(spawn([&](auto b) {
      auto rw = b->make_rw_lock("stream");
      for (;;) {
        auto reading = rw->acquire_read();
        counters_->holding.fetch_add(1);
        std::this_thread::sleep_for(3ms);
      }
      return 0;
    }));
  }
  while (counters_->holding.load() < 20) std::this_thread::sleep_for(1ms);  // the stream is flowing
  auto writing = backend_->make_rw_lock("stream")->try_acquire_write_for(20s);
  EXPECT_TRUE(writing) << "the readers' stream starved the writer";
  const int reads_before = counters_->holding.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(counters_->holding.load(), reads_before) << "a reader got in while the writer held";
  writing.release();
  for (pid_t r : readers) {
    ::kill(r, SIGKILL);
    wait_exit_code(r);
  }
}

TEST_F(FilePrimitives, AWaitingWriterIsWokenByTheLastReaderOfAnotherProcessLeaving) {
  // An hour of backoff: only the inotify wake-up on the reader's close can grant within the wait.
  signal_pipe go;
  const auto reader = spawn_holder([](dlock::backend& b) { return b.make_rw_lock("wake")->try_acquire_read(); }, &go);
  ASSERT_TRUE(reader.holds);
  auto patient = open_file("file://" + dir_.string() + "?poll=1h..1h")->make_rw_lock("wake");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto waiting = std::async(std::launch::async, [&] {
    auto got = patient->try_acquire_write_until(deadline);
    return got && std::chrono::steady_clock::now() < deadline;  // the last attempt at the deadline does not count
  });
  turnstile_taken("wake");
  go.say('g');  // the reader's fd closes with the process
  EXPECT_EQ(wait_exit_code(reader.pid), 0);
  EXPECT_TRUE(waiting.get()) << "the waiting writer slept through the reader's release until its deadline";
}

TEST_F(FilePrimitives, AKilledWaitingWriterLetsReadersInAgain) {
  const auto reader = spawn_holder([](dlock::backend& b) { return b.make_rw_lock("pref")->try_acquire_read(); });
  ASSERT_TRUE(reader.holds);
  const pid_t writer = spawn([&](auto b) {
    auto writing = b->make_rw_lock("pref")->acquire_write();
    return writing ? 0 : 1;
  });
  turnstile_taken("pref");
  auto rw = backend_->make_rw_lock("pref");
  EXPECT_FALSE(rw->try_acquire_read());
  ::kill(writer, SIGKILL);
  EXPECT_EQ(wait_exit_code(writer), 128 + SIGKILL);
  EXPECT_TRUE(rw->try_acquire_read()) << "the dead writer's turnstile was dropped by the kernel";
  ::kill(reader.pid, SIGKILL);
  wait_exit_code(reader.pid);
}

TEST_F(FilePrimitives, SemaphoreOfNNeverHoldsMoreAcrossProcessesAndReachesN) {
  constexpr std::uint32_t n = 3;
  constexpr int processes = 6, rounds = 15;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(spawn([&](auto b) {
      auto sem = b->make_semaphore("pool", n);
      for (int i = 0; i < rounds; ++i) {
        auto permit = sem->acquire();
        const int now = counters_->holding.fetch_add(1) + 1;
        if (now > static_cast<int>(n)) counters_->failures.fetch_add(1);
        int seen = counters_->most.load();
        while (now > seen && !counters_->most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(3ms);
        counters_->holding.fetch_sub(1);
      }
      return 0;
    }));
  }
  for (pid_t c : children) EXPECT_EQ(wait_exit_code(c), 0);
  EXPECT_EQ(counters_->failures.load(), 0) << "more than " << n << " permits were held at once";
  EXPECT_EQ(counters_->most.load(), static_cast<int>(n)) << "the semaphore never reached its " << n << " permits";
}

TEST_F(FilePrimitives, SemaphoreTakesAllPermitsOfAnAcquireOrNone) {
  auto sem = backend_->make_semaphore("batch", 3);
  auto two = sem->try_acquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(sem->try_acquire(2)) << "only one permit is free";
  auto one = sem->try_acquire(1);
  EXPECT_TRUE(one) << "the failed acquire of 2 gave back the permit it took";
  EXPECT_FALSE(sem->try_acquire(1));
  two.release();
  EXPECT_TRUE(sem->try_acquire(2));
}

TEST_F(FilePrimitives, SemaphoreOfAKilledHolderComesBack) {
  const auto child = spawn_holder([](dlock::backend& b) { return b.make_semaphore("pool", 2)->try_acquire(2); });
  ASSERT_TRUE(child.holds);
  auto sem = backend_->make_semaphore("pool", 2);
  EXPECT_FALSE(sem->try_acquire());
  ::kill(child.pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(child.pid), 128 + SIGKILL);
  EXPECT_TRUE(sem->try_acquire(2)) << "the kernel dropped the dead holder's slot flocks";
}

TEST_F(FilePrimitives, SemaphoreRefusesADifferentMaxCountOnceStored) {
  { ASSERT_TRUE(backend_->make_semaphore("sized", 3)->try_acquire()); }
  std::error_code ec;
  auto other = backend_->make_semaphore("sized", 4)->try_acquire(1, ec);
  EXPECT_FALSE(other);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  EXPECT_TRUE(backend_->make_semaphore("sized", 3)->try_acquire());
}

TEST_F(FilePrimitives, FencingTokensIncreasePerGrantReadsIncludedAndSurviveReopening) {
  auto rw = backend_->make_rw_lock("fenced");
  std::uint64_t previous = 0;
  {
    auto r1 = rw->try_acquire_read();
    auto r2 = rw->try_acquire_read();
    ASSERT_TRUE(r1 && r2);
    EXPECT_GT(*r1.fencing_token(), previous);
    EXPECT_GT(*r2.fencing_token(), *r1.fencing_token());
    previous = *r2.fencing_token();
  }
  {
    auto w = rw->try_acquire_write();
    ASSERT_TRUE(w);
    EXPECT_GT(*w.fencing_token(), previous);
    previous = *w.fencing_token();
  }
  auto again = open_file(uri_)->make_rw_lock("fenced")->try_acquire_read();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again.fencing_token(), previous + 1) << "the counter continues (same boot: no jump)";

  auto sem = backend_->make_semaphore("fenced-sem", 2);  // another name: never beside "fenced"'s reader
  auto a = sem->try_acquire();
  auto b = sem->try_acquire();
  ASSERT_TRUE(a && b);
  EXPECT_GT(*b.fencing_token(), *a.fencing_token());
}

// The turnstile and the counter files stay open in the rw_lock / semaphore object (kept_file). A
// forked child inherits that open file description, on which flock would not exclude parent and
// child: each must open its own, or two processes read-modify-write the counter at once.
TEST_F(FilePrimitives, ObjectsUsedOnBothSidesOfAForkNeverShareACounter) {
  constexpr int processes = 4, grants = 300;
  auto rw = backend_->make_rw_lock("forked");
  auto sem = backend_->make_semaphore("forked-sem", processes);  // another name: never beside "forked"'s readers
  ASSERT_TRUE(rw->try_acquire_read() && sem->try_acquire());     // the kept files are open now
  const std::size_t bytes = sizeof(std::uint64_t) * processes * grants * 2;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* tokens = static_cast<std::uint64_t*>(mem);
  const auto run = [&](int p) {
    for (int i = 0; i < grants; ++i) {
      auto r = rw->try_acquire_read();
      auto s = sem->acquire();
      tokens[(p * grants + i) * 2] = r ? *r.fencing_token() : 0;
      tokens[(p * grants + i) * 2 + 1] = *s.fencing_token();
    }
    return 0;
  };
  std::vector<pid_t> children;
  for (int p = 1; p < processes; ++p) children.push_back(spawn([&, p](auto) { return run(p); }));
  run(0);
  for (auto pid : children) EXPECT_EQ(wait_exit_code(pid), 0);
  std::set<std::uint64_t> rw_tokens, sem_tokens;
  for (int k = 0; k < processes * grants; ++k) {
    EXPECT_NE(tokens[k * 2], 0u) << "every read is granted (no writer)";
    rw_tokens.insert(tokens[k * 2]);
    sem_tokens.insert(tokens[k * 2 + 1]);
  }
  EXPECT_EQ(rw_tokens.size(), std::size_t{processes * grants}) << "no token handed out twice";
  EXPECT_EQ(sem_tokens.size(), std::size_t{processes * grants}) << "no token handed out twice";
  ::munmap(mem, bytes);
}

// Threads sharing one object share its kept files too: its mutex keeps them one at a time.
TEST_F(FilePrimitives, ThreadsSharingOneObjectNeverShareAToken) {
  constexpr int threads = 6, grants = 300;
  auto rw = backend_->make_rw_lock("threads");
  std::vector<std::vector<std::uint64_t>> tokens(threads);
  std::vector<std::thread> spawned;
  for (int t = 0; t < threads; ++t)
    spawned.emplace_back([&, t] {
      for (int i = 0; i < grants; ++i)
        if (auto r = rw->try_acquire_read()) tokens[t].push_back(*r.fencing_token());
    });
  for (auto& s : spawned) s.join();
  std::set<std::uint64_t> all;
  std::size_t granted = 0;
  for (const auto& v : tokens) {
    granted += v.size();
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(granted, std::size_t{threads * grants});
  EXPECT_EQ(all.size(), granted) << "no token handed out twice";
}

// The readers' turn file replaced while an object keeps it open: the object follows the name (the
// inode check after each flock), so it and every other reader take their turn on one file. A
// LOCK_EX held on the new file holds back the kept object's read grant until it is let go.
TEST_F(FilePrimitives, AKeptTurnFileReplacedIsOpenedAgain) {
  auto rw = backend_->make_rw_lock("kept");
  std::uint64_t first = 0;
  {
    auto r = rw->try_acquire_read();
    ASSERT_TRUE(r);
    first = *r.fencing_token();
  }
  const auto path = dir_ / dlock::file::rw_files("kept").turn;
  ASSERT_TRUE(fs::exists(path)) << "the kept file is open now";
  const auto temp = dir_ / ".replacement";
  fs::copy_file(path, temp);
  fs::rename(temp, path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto reading = std::async(std::launch::async, [&] { return rw->try_acquire_read(); });
  EXPECT_EQ(reading.wait_for(300ms), std::future_status::timeout)
      << "the kept object took its turn on the replaced file, beside whoever takes it on the new one";
  ::close(fd);
  auto again = reading.get();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again.fencing_token(), first + 1);
}

TEST_F(FilePrimitives, ANewBootContinuesFromTheFlushedMark) {
  // The counter of a previous boot: last 10 handed out, mark 5000 flushed, another boot id.
  auto rw = backend_->make_rw_lock("rebooted");
  { ASSERT_TRUE(rw->try_acquire_read()); }
  const auto path = dir_ / dlock::file::rw_files("rebooted").lock;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::error_code ec;
  auto state = dlock::file::read_counter_file(fd, path.string(), ec);
  ASSERT_TRUE(state) << ec.message();
  EXPECT_GT(state->reserved, state->last) << "the mark is ahead of the tokens handed out";
  unsigned char bytes[64] = {};
  bytes[0] = 10;
  bytes[8] = 0x88;
  bytes[9] = 0x13;  // 5000
  std::memset(bytes + 24, 'x', 36);
  ASSERT_EQ(::pwrite(fd, bytes, 64, 0), 64);
  ::close(fd);
  auto after = rw->try_acquire_write();
  ASSERT_TRUE(after);
  EXPECT_EQ(*after.fencing_token(), 5001u) << "tokens of the last boot above [0, 8) may be lost; the mark is not";
}

TEST_F(FilePrimitives, ReplacedFileMakesReleaseNotOwner) {
  auto rw = backend_->make_rw_lock("replaced");
  auto held = rw->try_acquire_write();
  ASSERT_TRUE(held);
  const auto path = dir_ / dlock::file::rw_files("replaced").lock;
  const auto temp = dir_ / ".replacement";
  fs::copy_file(path, temp);
  fs::rename(temp, path);
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST_F(FilePrimitives, FileNamesOfEveryKindNeverMeet) {
  // Names chosen so one kind's suffix reads like another's key: "a.rw" and "a.sem" as locks, "a"
  // as a semaphore of 12 (slot 1 vs slots 10, 11, and "a.sem.1" as a name), "a.sem-held" and
  // "a.rw-gate" as names of their own.
  const std::vector<std::string> names = {"a",      "a.rw",       "a.sem",      "a.sem.1",    "a.rw-gate",
                                          "a.lock", "a.sem-held", "a.rw-fence", "a.sem.1.sem"};
  std::set<std::string> files;
  std::size_t expected = 0;
  for (const auto& n : names) {
    const auto rw = dlock::file::rw_files(n);
    EXPECT_EQ(rw.lock, dlock::file::lock_file_name(n)) << "the mutex and the rw lock of a name share its lock file";
    files.insert({rw.lock, rw.gate, rw.turn});
    const auto sem = dlock::file::semaphore_files(n);
    files.insert({sem.meta, sem.held});
    for (std::uint32_t i = 0; i < 12; ++i) files.insert(sem.slot(i));
    expected += 3 + 2 + 12;
  }
  EXPECT_EQ(files.size(), expected);
  // And in use: a mutex "a.sem.0", a semaphore "a" of one permit and writers of "a.rw" and
  // "a.sem-held" are different locks.
  auto mutex = backend_->make_lock("a.sem.0")->try_acquire();
  auto permit = backend_->make_semaphore("a", 1)->try_acquire();
  auto writer = backend_->make_rw_lock("a.rw")->try_acquire_write();
  auto other_writer = backend_->make_rw_lock("a.sem-held")->try_acquire_write();
  EXPECT_TRUE(mutex && permit && writer && other_writer);
}

// ---- One name, one lock: the mutex is a writer of its name's reader-writer lock -----------------

// flock(1) on the documented lock file is a reader (-s) or a writer (-x) of the name, and dlock's
// read, write and mutex are the same to it: `dlock run --shared` is `flock -s`, `dlock run` and
// `--write` are `flock -x`.
TEST_F(FilePrimitives, FlockOfTheLockFileIsAReaderOrWriterOfTheName) {
  const auto path = dir_ / dlock::file::lock_file_name("shared-file");
  const auto flock_cli = [&](const char* mode) {  // flock(1) without waiting: 0 got it, 1 refused
    const auto cmd = std::string("flock -n ") + mode + " '" + path.string() + "' true";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto rw = backend_->make_rw_lock("shared-file");
  auto mutex = backend_->make_lock("shared-file");
  {
    auto reading = rw->try_acquire_read();
    ASSERT_TRUE(reading);
    EXPECT_EQ(flock_cli("-s"), 0) << "flock -s shares with dlock's readers";
    EXPECT_EQ(flock_cli("-x"), 1) << "flock -x is refused while dlock's readers hold";
  }
  for (const bool use_mutex : {true, false}) {
    auto held = use_mutex ? mutex->try_acquire() : rw->try_acquire_write();
    ASSERT_TRUE(held);
    EXPECT_EQ(flock_cli("-s"), 1) << (use_mutex ? "the mutex" : "the writer") << " excludes flock -s";
    EXPECT_EQ(flock_cli("-x"), 1) << (use_mutex ? "the mutex" : "the writer") << " excludes flock -x";
  }
  // The other way round: a shared flock on the file (as `flock -s` holds it) lets dlock's readers
  // in and keeps its writers and mutex out; an exclusive one keeps everyone out.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  EXPECT_TRUE(rw->try_acquire_read());
  EXPECT_FALSE(rw->try_acquire_write());
  EXPECT_FALSE(mutex->try_acquire());
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  EXPECT_FALSE(rw->try_acquire_read());
  ::close(fd);
  EXPECT_TRUE(mutex->try_acquire());
}

// A mutex waiting in one process keeps the turnstile as a waiting writer does: readers of other
// processes arriving after it stay out, the reader inside leaves, and the mutex gets the lock.
TEST_F(FilePrimitives, AWaitingMutexHoldsBackNewReadersOfOtherProcesses) {
  signal_pipe reader_go, mutex_done;
  const auto reader =
      spawn_holder([](dlock::backend& b) { return b.make_rw_lock("pref-mutex")->try_acquire_read(); }, &reader_go);
  ASSERT_TRUE(reader.holds);
  const pid_t waiting = spawn([&](auto b) {
    auto locked = b->make_lock("pref-mutex")->try_acquire_for(20s);
    mutex_done.say(locked ? 'm' : 'n');
    return 0;
  });
  EXPECT_TRUE(turnstile_taken("pref-mutex")) << "the mutex never took the turnstile while waiting";
  auto rw = backend_->make_rw_lock("pref-mutex");
  EXPECT_FALSE(rw->try_acquire_read()) << "a reader arriving while a mutex waits must not get in before it";
  reader_go.say('g');
  EXPECT_EQ(mutex_done.hear(), 'm') << "the mutex gets the lock once the reader before it leaves";
  EXPECT_EQ(wait_exit_code(reader.pid), 0);
  EXPECT_EQ(wait_exit_code(waiting), 0);
  EXPECT_TRUE(rw->try_acquire_read());
}

// A mutex waiting behind a reader of another process sleeps in the kernel and wakes at the
// reader's release: with an hour of backoff, only the inotify wake-up can grant within the wait.
TEST_F(FilePrimitives, AWaitingMutexIsWokenByTheLastReaderOfAnotherProcessLeaving) {
  signal_pipe go;
  const auto reader =
      spawn_holder([](dlock::backend& b) { return b.make_rw_lock("wake-mutex")->try_acquire_read(); }, &go);
  ASSERT_TRUE(reader.holds);
  auto patient = open_file("file://" + dir_.string() + "?poll=1h..1h")->make_lock("wake-mutex");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto waiting = std::async(std::launch::async, [&] {
    auto got = patient->try_acquire_until(deadline);
    return got && std::chrono::steady_clock::now() < deadline;
  });
  EXPECT_TRUE(turnstile_taken("wake-mutex")) << "the mutex is not waiting";
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout) << "the mutex was granted beside the reader";
  go.say('g');
  EXPECT_EQ(wait_exit_code(reader.pid), 0);
  EXPECT_TRUE(waiting.get()) << "the waiting mutex slept through the reader's release until its deadline";
}

// The tokens of the mutex, readers and writers of a name are one sequence, and it continues above
// what older versions handed out: the mutex's 8-byte counter in the lock file, and the reader-writer
// lock's counter in <key>.rw-fence (read once, when the lock file is not yet in its 64-byte layout).
TEST_F(FilePrimitives, TokensContinueAboveTheCountersOfOlderVersions) {
  fs::create_directories(dir_);
  const auto write_file = [&](const std::string& file, const std::vector<unsigned char>& bytes) {
    const int fd = ::open((dir_ / file).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0660);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  };
  const auto files = dlock::file::rw_files("older");
  write_file(files.lock, {41, 0, 0, 0, 0, 0, 0, 0});  // an older mutex handed out 41
  std::vector<unsigned char> fence(64, 0);
  fence[0] = 100;  // an older rw lock handed out 100,
  fence[8] = 0x64;
  fence[9] = 0x10;  // with its mark at 4196
  std::memset(fence.data() + 24, 'x', 36);
  write_file(files.turn, fence);
  auto reading = backend_->make_rw_lock("older")->try_acquire_read();
  ASSERT_TRUE(reading);
  EXPECT_EQ(*reading.fencing_token(), 4197u) << "above every token the older rw lock may have handed out";
  reading.release();
  auto locked = backend_->make_lock("older")->try_acquire();
  ASSERT_TRUE(locked);
  EXPECT_EQ(*locked.fencing_token(), 4198u) << "the mutex counts on the same sequence";
  locked.release();
  // And an older mutex on the same name still reads and bumps bytes 0..7 of the lock file.
  const int fd = ::open((dir_ / files.lock).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  unsigned char first[8] = {};
  ASSERT_EQ(::pread(fd, first, 8, 0), 8);
  ::close(fd);
  EXPECT_EQ(first[0] | (first[1] << 8), 4198);
  EXPECT_EQ(fs::file_size(dir_ / files.lock), 64u);
}

// Mutex holders and semaphore permit holders of one name in racing processes: never both held at
// once (racing acquirers of the two kinds may both be refused, never both granted), and every
// refusal is a name_conflict, never another error. Each process goes on past its rounds until both
// kinds have been granted (within a bound): on a starved machine the permits can be held through
// every try of the other kind, and a race of one kind only would prove nothing.
TEST_F(FilePrimitives, ASemaphoreAndALockOfOneNameNeverHoldTogetherAcrossProcesses) {
  constexpr int processes = 4, rounds = 150;
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  struct kinds {
    std::atomic<int> locks{0}, permits{0}, both{0}, errors{0}, lock_grants{0}, permit_grants{0};
  };
  void* mem = ::mmap(nullptr, sizeof(kinds), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* k = new (mem) kinds();
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(spawn([&, p](auto b) {
      auto mutex = b->make_lock("contested");
      auto rw = b->make_rw_lock("contested");
      auto sem = b->make_semaphore("contested", 3);
      const auto both_granted = [&] { return k->lock_grants.load() > 0 && k->permit_grants.load() > 0; };
      for (int i = 0; i < rounds || (!both_granted() && std::chrono::steady_clock::now() < give_up); ++i) {
        std::error_code ec;
        const int what = (i + p) % 3;  // 0: mutex, 1: a reader, 2: a permit
        auto held = what == 0 ? mutex->try_acquire(ec) : what == 1 ? rw->try_acquire_read(ec) : sem->try_acquire(1, ec);
        if (ec && ec != dlock::errc::name_conflict) k->errors.fetch_add(1);
        if (!held) continue;
        auto& mine = what == 2 ? k->permits : k->locks;
        auto& theirs = what == 2 ? k->locks : k->permits;
        (what == 2 ? k->permit_grants : k->lock_grants).fetch_add(1);
        mine.fetch_add(1);
        if (theirs.load() != 0) k->both.fetch_add(1);
        std::this_thread::sleep_for(200us);
        if (theirs.load() != 0) k->both.fetch_add(1);
        mine.fetch_sub(1);
      }
      return 0;
    }));
  }
  for (pid_t c : children) EXPECT_EQ(wait_exit_code(c), 0);
  EXPECT_EQ(k->both.load(), 0) << "a lock and a semaphore of one name were held at once";
  EXPECT_EQ(k->errors.load(), 0) << "a refusal other than name_conflict";
  EXPECT_GT(k->lock_grants.load(), 0);
  EXPECT_GT(k->permit_grants.load(), 0);
  ::munmap(mem, sizeof(kinds));
}

// The waiting forms are refused at once too: an hour of waiting is not slept.
TEST_F(FilePrimitives, ASemaphoreAndALockOfOneNameAreRefusedWithoutWaiting) {
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  {
    auto writing = backend_->make_rw_lock("no-wait")->try_acquire_write();
    ASSERT_TRUE(writing);
    auto permit = backend_->make_semaphore("no-wait", 2)->try_acquire_for(1h, 1, ec);
    EXPECT_FALSE(permit);
    EXPECT_EQ(ec, dlock::errc::name_conflict);
    EXPECT_NE(dlock::last_error_message().find("in use as a reader-writer lock"), std::string::npos)
        << dlock::last_error_message();
  }
  auto permit = backend_->make_semaphore("no-wait", 2)->try_acquire();
  ASSERT_TRUE(permit) << "the name is free for a semaphore once the writer left";
  auto locked = backend_->make_lock("no-wait")->try_acquire_for(1h, ec);
  EXPECT_FALSE(locked);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  auto writing = backend_->make_rw_lock("no-wait")->try_acquire_write_for(1h, ec);
  EXPECT_FALSE(writing);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  EXPECT_NE(dlock::last_error_message().find("in use as a semaphore"), std::string::npos)
      << dlock::last_error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << "a refusal waited";
  EXPECT_TRUE(permit.held());
  EXPECT_TRUE(backend_->make_semaphore("no-wait", 2)->try_acquire()) << "the refused locks took no permit";
}

}  // namespace
