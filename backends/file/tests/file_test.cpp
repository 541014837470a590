// file:// behaviour beyond the shared conformance suite: processes contending via fork(), the
// kernel freeing a killed holder's lock, fencing across processes, the replaced-inode check, name
// mapping, and the directory error messages.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <set>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/fork_child.hpp"
#include "dlock_test/signal_pipe.hpp"
#include "lock_file.hpp"

namespace dlock {
void register_file(registry& r);
}

namespace {

using dlock::testing::fork_child;
using dlock::testing::signal_pipe;
using dlock::testing::wait_exit_code;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

dlock::registry& file_registry() {
  static dlock::registry* r = [] {
    auto* reg = new dlock::registry();
    dlock::register_file(*reg);
    return reg;
  }();
  return *r;
}

class File : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path("/tmp") / ("dlock-file-test-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    uri_ = "file://" + dir_.string();
    backend_ = file_registry().open(uri_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string uri_;
  std::shared_ptr<dlock::backend> backend_;
};

// A child process that takes the lock `name` through its own registry on `uri`, says 'y' on `held`
// ('n' when it could not take it) and holds it until it is killed.
pid_t fork_holder(const std::string& uri, const std::string& name, const signal_pipe& held) {
  return fork_child([&] {
    dlock::registry r;
    dlock::register_file(r);
    auto lease = r.open(uri)->make_lock(name)->try_acquire();
    if (!held.say(lease ? 'y' : 'n')) return 2;
    ::pause();  // hold until killed
    return 0;
  });
}

TEST_F(File, DeclaresHostScopeAndHonestCapabilities) {
  EXPECT_EQ(backend_->scope(), dlock::lock_scope::host);
  EXPECT_EQ(backend_->caps(),
            (dlock::capabilities{dlock::capability::expiring, dlock::capability::fencing, dlock::capability::read_write,
                                 dlock::capability::semaphore, dlock::capability::writer_preferred}))
      << "the mutex's own set, plus the primitives beside it (file_primitives_test.cpp)";
  auto held = backend_->make_lock("x")->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(held.valid_until(), dlock::lease::clock::time_point::max()) << "no ttl while the holder lives";
  EXPECT_TRUE(held.fencing_token());
}

TEST_F(File, DirectoryIsCreatedWithMode0700) {
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(File, TwoLockObjectsInOneProcessExcludeEachOtherAndNeitherReenters) {
  auto a = backend_->make_lock("job");
  auto b = backend_->make_lock("job");
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->try_acquire());
  EXPECT_FALSE(a->try_acquire()) << "flock is per open file description: not reentrant, as declared";
  held.release();
  EXPECT_TRUE(b->try_acquire());
}

TEST_F(File, ChildProcessHoldingExcludesParentAndSigkillFreesTheLock) {
  signal_pipe held;
  const pid_t child = fork_holder(uri_, "shared", held);
  ASSERT_EQ(held.hear(), 'y');
  auto lock = backend_->make_lock("shared");
  EXPECT_FALSE(lock->try_acquire()) << "a lock held by another process must exclude this one";
  ::kill(child, SIGKILL);
  EXPECT_EQ(wait_exit_code(child), 128 + SIGKILL);
  EXPECT_TRUE(lock->try_acquire()) << "the kernel drops the flock of a dead holder";
}

TEST_F(File, ProcessesContendingKeepACounterExactAndTokensIncreasing) {
  const fs::path counter = dir_ / "counter.txt";
  const fs::path tokens = dir_ / "tokens.txt";
  { std::ofstream(counter) << 0; }
  constexpr int processes = 3, rounds = 40;
  std::vector<pid_t> children;
  const std::string uri = uri_;
  for (int p = 0; p < processes; ++p) {
    children.push_back(fork_child([&] {
      dlock::registry r;
      dlock::register_file(r);
      auto lock = r.open(uri)->make_lock("counter");
      for (int i = 0; i < rounds; ++i) {
        auto held = lock->acquire();
        long value = 0;
        { std::ifstream(counter) >> value; }
        { std::ofstream(counter) << value + 1; }  // a lossy read-modify-write without the lock
        { std::ofstream(tokens, std::ios::app) << *held.fencing_token() << '\n'; }
      }
      return 0;
    }));
  }
  for (pid_t c : children) EXPECT_EQ(wait_exit_code(c), 0);
  long value = 0;
  std::ifstream(counter) >> value;
  EXPECT_EQ(value, processes * rounds);
  std::ifstream in(tokens);
  std::uint64_t previous = 0, token = 0;
  int n = 0;
  while (in >> token) {
    EXPECT_GT(token, previous) << "grant " << n;
    previous = token;
    ++n;
  }
  EXPECT_EQ(n, processes * rounds);
}

TEST_F(File, LockFileIsKeptAndTheCounterContinues) {
  auto lock = backend_->make_lock("persist");
  std::uint64_t first = 0;
  {
    auto held = lock->try_acquire();
    ASSERT_TRUE(held);
    first = *held.fencing_token();
  }
  EXPECT_TRUE(fs::exists(dir_ / "persist.lock")) << "lock files are never unlinked (they carry the counter)";
  auto again = lock->try_acquire();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again.fencing_token(), first + 1);
}

TEST_F(File, ReplacedLockFileMakesReleaseNotOwnerAndFreesTheName) {
  auto mine = backend_->make_lock("replaced");
  auto held = mine->try_acquire();
  ASSERT_TRUE(held);
  const auto path = dir_ / "replaced.lock";
  const auto temp = dir_ / ".replacement";
  fs::copy_file(path, temp);  // keeps the counter, as an operator restoring the file would
  fs::rename(temp, path);     // a new inode under the same name
  auto theirs = backend_->make_lock("replaced");
  auto taken = theirs->try_acquire();
  ASSERT_TRUE(taken) << "the new inode is not locked by anyone";
  EXPECT_GT(*taken.fencing_token(), *held.fencing_token());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner) << "our inode is no longer the lock file";
  EXPECT_FALSE(mine->try_acquire()) << "the stale release must not free the new holder's lock";
}

TEST_F(File, DeletedLockFileIsRecreatedAndTheStaleHolderIsNotOwner) {
  auto held = backend_->make_lock("deleted")->try_acquire();
  ASSERT_TRUE(held);
  fs::remove(dir_ / "deleted.lock");
  auto other = backend_->make_lock("deleted")->try_acquire();
  EXPECT_TRUE(other);
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST_F(File, NamesMapToDistinctFilesInsideTheDirectory) {
  const std::vector<std::string> names = {"a/b",
                                          "a_b",
                                          "..",
                                          ".",
                                          ".hidden",
                                          "A",
                                          "a",
                                          "#a",
                                          "a b",
                                          "\xff",
                                          std::string(200, 'n'),
                                          std::string(201, 'n'),
                                          std::string(4096, 'z'),
                                          "../escape",
                                          std::string("nul\0byte", 8)};
  std::vector<dlock::lease> held;
  std::set<std::string> files;
  for (const auto& n : names) {
    auto l = backend_->make_lock(n)->try_acquire();
    ASSERT_TRUE(l) << "name of " << n.size() << " bytes";
    held.push_back(std::move(l));
    const auto file = dlock::file::lock_file_name(n);
    EXPECT_TRUE(files.insert(file).second) << file << " collides";
    EXPECT_FALSE(file.starts_with('.'));
    EXPECT_EQ(file.find('/'), std::string::npos);
    EXPECT_LE(file.size(), 255u);
  }
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "escape.lock"));
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file();
  EXPECT_EQ(entries, names.size());
  EXPECT_EQ(dlock::file::lock_file_name("plain-name_1.x"), "plain-name_1.x.lock");
}

TEST_F(File, SymlinkedLockFileIsRefused) {
  const auto target = dir_ / "target.txt";
  { std::ofstream(target) << "precious"; }
  fs::create_symlink(target, dir_ / "link.lock");
  try {
    (void)backend_->make_lock("link")->try_acquire();
    FAIL() << "a symlink must not be followed";
  } catch (const dlock::error& e) {
    EXPECT_NE(std::string(e.what()).find("symlink"), std::string::npos) << e.what();
  }
  std::string content;
  std::ifstream(target) >> content;
  EXPECT_EQ(content, "precious");
}

TEST(FileUri, IsBuiltIntoTheDefaultRegistry) { EXPECT_TRUE(dlock::default_registry().contains("file")); }

TEST(FileUri, MissingPathNamesTheExpectedForm) {
  for (const char* bad : {"file://", "file:///", "file://otherhost/x", "file://user@localhost/x"}) {
    try {
      (void)file_registry().open(bad);
      ADD_FAILURE() << bad << " must be refused";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << bad;
      EXPECT_NE(std::string(e.what()).find("file:///var/lock/myapp"), std::string::npos) << e.what();
    }
  }
}

TEST(FileUri, UnwritableDirectoryIsAClearError) {
  // Root bypasses permission bits, so the check runs in a child that drops to nobody.
  const fs::path parent = fs::path("/tmp") / ("dlock-file-perm-" + std::to_string(::getpid()));
  fs::remove_all(parent);
  fs::create_directories(parent);
  fs::permissions(parent, fs::perms::owner_all);  // 0700, owned by us
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = fork_child([&] {
    ::close(out[0]);
    if (::geteuid() == 0 && ::setuid(65534) != 0) return 3;
    std::string message = "opened";
    try {
      (void)file_registry().open("file://" + (parent / "sub").string());
    } catch (const dlock::error& e) {
      message = std::to_string(static_cast<int>(e.code().value())) + " " + e.what();
    }
    return ::write(out[1], message.data(), message.size()) > 0 ? 0 : 2;
  });
  ::close(out[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  EXPECT_EQ(wait_exit_code(child), 0);
  fs::remove_all(parent);
  EXPECT_EQ(message.rfind(std::to_string(static_cast<int>(dlock::errc::backend_unavailable)) + " ", 0), 0u) << message;
  EXPECT_NE(message.find((parent / "sub").string()), std::string::npos) << message;
  EXPECT_NE(message.find("Permission denied"), std::string::npos) << message;
}

}  // namespace

namespace {

// How many fds of process `pid` refer to `file` (read from /proc/<pid>/fd).
int open_count(pid_t pid, const fs::path& file) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    if (fs::read_symlink(e.path(), link_ec) == file) ++n;
  }
  return n;
}

// Until `pid` has had at least `n` fds on `file` for two looks 50 ms apart (a waiter's watch
// keeps one open while it sleeps; a passing attempt closes its own at once). Hang guard only.
void await_open(pid_t pid, const fs::path& file, int n) {
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  int seen = 0;
  while (seen < 2 && std::chrono::steady_clock::now() < give_up) {
    seen = open_count(pid, file) >= n ? seen + 1 : 0;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(seen, 2) << "no waiter ever kept " << file << " open";
}

dlock::lock_options never_polling() {
  dlock::lock_options o;
  o.poll = {1h, 1h};
  return o;
}

}  // namespace

// A waiter in another process sleeps in the kernel (inotify on the lock file) and wakes at the
// release: with a backoff of an hour, getting the lock before its deadline can only come from
// the release waking it.
TEST_F(File, ACrossProcessWaiterWakesOnTheRelease) {
  signal_pipe go;
  const std::string uri = uri_;
  // Forked before the parent locks: a child forked after would inherit the held fd, and with it
  // the lock (the kernel frees it when both have closed it).
  const pid_t child = fork_child([&] {
    if (go.hear() == 0) return 2;
    dlock::registry r;
    dlock::register_file(r);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    auto got = r.open(uri)->make_lock("wake", never_polling())->try_acquire_until(deadline);
    return got && std::chrono::steady_clock::now() < deadline ? 0 : 1;
  });
  auto held = backend_->make_lock("wake")->try_acquire();
  ASSERT_TRUE(held);
  ASSERT_TRUE(go.say('g'));
  await_open(child, dir_ / "wake.lock", 1);
  held.release();
  EXPECT_EQ(wait_exit_code(child), 0) << "the waiter slept through the release until its deadline";
}

// A holder killed with SIGKILL wakes the waiter too: the kernel closes the dead process's fd.
TEST_F(File, AWaiterWakesWhenTheHolderIsKilled) {
  signal_pipe held;
  const pid_t holder = fork_holder(uri_, "killed", held);
  ASSERT_EQ(held.hear(), 'y');
  const std::string uri = uri_;
  const pid_t waiter = fork_child([&] {
    dlock::registry r;
    dlock::register_file(r);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    auto got = r.open(uri)->make_lock("killed", never_polling())->try_acquire_until(deadline);
    return got && std::chrono::steady_clock::now() < deadline ? 0 : 1;
  });
  await_open(waiter, dir_ / "killed.lock", 1);
  ::kill(holder, SIGKILL);
  EXPECT_EQ(wait_exit_code(holder), 128 + SIGKILL);
  EXPECT_EQ(wait_exit_code(waiter), 0) << "the waiter slept through its holder's death";
}

// A lock file replaced while a waiter sleeps on it: the waiter wakes (the old inode lost its
// name), finds the new file free and takes it.
TEST_F(File, AWaiterFollowsAReplacedLockFile) {
  auto held = backend_->make_lock("moved")->try_acquire();
  ASSERT_TRUE(held);
  auto waiter = backend_->make_lock("moved", never_polling());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto got = std::async(std::launch::async, [&] { return waiter->try_acquire_until(deadline); });
  await_open(::getpid(), dir_ / "moved.lock", 2);  // the holder's fd and the waiter's
  const auto temp = dir_ / ".replacement";
  fs::copy_file(dir_ / "moved.lock", temp);
  fs::rename(temp, dir_ / "moved.lock");
  auto lease = got.get();
  ASSERT_TRUE(lease);
  EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "the waiter slept through the replacement";
  EXPECT_GT(*lease.fencing_token(), *held.fencing_token());
}

// The threads of one process share a file:// lock evenly: they stand in the core's line, and the
// head's kernel wait wakes at each release. Before, the releasing thread took it again at once.
TEST_F(File, ThreadsOfOneProcessShareTheLockEvenly) {
  constexpr int threads = 8, per_thread = 20, total = threads * per_thread;
  std::atomic<int> done{0};
  std::latch start(threads);
  std::vector<int> cycles(threads, 0);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      auto lock = backend_->make_lock("shared", never_polling());
      start.arrive_and_wait();
      while (done.load() < total) {
        auto held = lock->try_acquire_for(20s);
        if (held && done.fetch_add(1) < total) ++cycles[static_cast<std::size_t>(i)];
      }
    });
  }
  for (auto& t : pool) t.join();
  const auto [least, most] = std::minmax_element(cycles.begin(), cycles.end());
  EXPECT_GE(*least, per_thread / 2) << "a waiter starved";
  EXPECT_LE(*most, per_thread * 2) << "a thread kept taking the lock again";
}

namespace {

std::string this_host() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host;
}

}  // namespace

TEST_F(File, InspectNamesTheHoldingProcessFromProcLocks) {
  EXPECT_FALSE(backend_->inspect("inspected").held);
  signal_pipe held;
  const pid_t child = fork_holder(uri_, "inspected", held);
  ASSERT_EQ(held.hear(), 'y');
  const auto info = backend_->inspect("inspected");
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, this_host() + ":" + std::to_string(child));
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::write);
  EXPECT_FALSE(info.waiters_known);
  EXPECT_EQ(backend_->list(), std::vector<std::string>{"inspected"});
  EXPECT_TRUE(backend_->list("other").empty());
  ::kill(child, SIGKILL);
  (void)wait_exit_code(child);
  EXPECT_FALSE(backend_->inspect("inspected").held) << "the kernel dropped the dead holder's flock";
  EXPECT_TRUE(backend_->list().empty());
}

TEST_F(File, InspectTellsReadersApartAndForceReleaseIsRefused) {
  auto rw = backend_->make_rw_lock("shared");
  auto r1 = rw->try_acquire_read();
  auto r2 = backend_->make_rw_lock("shared")->try_acquire_read();
  ASSERT_TRUE(r1 && r2);
  const auto info = backend_->inspect("shared");
  ASSERT_EQ(info.holders.size(), 2u);
  for (const auto& h : info.holders) {
    EXPECT_EQ(h.kind, dlock::hold_kind::read);
    EXPECT_EQ(h.owner, this_host() + ":" + std::to_string(::getpid()));
  }
  std::error_code ec;
  (void)backend_->force_release("shared", ec);
  EXPECT_EQ(ec, dlock::errc::not_supported);
  EXPECT_NE(dlock::last_error_message().find("file"), std::string::npos) << dlock::last_error_message();
  EXPECT_TRUE(r1.held());
}
