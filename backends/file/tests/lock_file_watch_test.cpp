// The inotify wait of a writer or mutex (lock_file_watch.hpp) when the release lags its close
// event: the kernel queues a close's event before it drops the closing fd's flock, so a waiter
// can wake, find the lock still held, and see no further event for that release.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>

#include "dlock_test/support.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"
#include "lock_file_watch.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(LockFileWatch, AReleaseThatLagsTheCloseEventIsSeenWithoutAnotherEvent) {
  const auto dir_path = fs::path("/tmp") / dlock::testing::unique_name("dlock-watch");
  const dlock::file::lock_directory dir(dir_path);
  const auto name = dlock::file::lock_file_name("lagging");
  const auto where = (dir_path / name).string();

  std::error_code ec;
  auto holder = dlock::file::open_lock_file(dir.fd(), name, where, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(::flock(holder.get(), LOCK_EX | LOCK_NB), 0);

  dlock::file::lock_file_watch watch(dir, name);
  EXPECT_FALSE(watch.try_flock(LOCK_EX, ec));
  ASSERT_FALSE(ec) << ec.message();

  // A close event while the lock is still held (what a waiter sees when the release lags it).
  ::close(::open(where.c_str(), O_RDONLY | O_CLOEXEC));
  watch.wait_until(std::chrono::steady_clock::now() + 10s);
  EXPECT_FALSE(watch.try_flock(LOCK_EX, ec)) << "the lock was still held";

  // The release itself, with no event of its own.
  ASSERT_EQ(::flock(holder.get(), LOCK_UN), 0);
  const auto start = std::chrono::steady_clock::now();
  watch.wait_until(start + 10s);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, 2s) << "the waiter slept through a release that came after its close event";
  EXPECT_TRUE(watch.try_flock(LOCK_EX, ec)) << ec.message();
  fs::remove_all(dir_path);
}

}  // namespace
