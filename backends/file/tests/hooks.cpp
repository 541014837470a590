// Conformance hooks for file://.
//   is_held_on_server: a LOCK_SH|LOCK_NB flock from a fresh fd conflicts with any held LOCK_EX.
//   break_lock: what an operator would do, since nothing can take a kernel lock from a live holder:
//     replace the name's lock file (new inode, same contents: the fencing counter) with an atomic
//     rename. That breaks the name's mutex, readers and writer alike (they share the file). The
//     next acquirer locks the new file; the holder cannot notice (file:// declares no
//     lost_notification) and its release reports not_owner. For a semaphore of the name, the same
//     for each existing <key>.sem.<i> and <key>.sem-held (empty files): every grant of the name is
//     broken, as memory's break does.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>

#include "dlock/spi.hpp"
#include "dlock_test/hooks.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"
#include "shared_files.hpp"

namespace {

namespace fs = std::filesystem;

// Replaces `path`, if it exists, with a new inode of the same contents (atomic rename).
void replace_file(const fs::path& path) {
  if (!fs::exists(path)) return;
  // '.'-prefixed names are never lock files (file_key never yields one).
  const auto temp = path.parent_path() / (".break-" + dlock::spi::random_token());
  fs::copy_file(path, temp);
  dlock::file::unique_fd fd(::open(temp.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0 || std::rename(temp.c_str(), path.c_str()) != 0)
    throw dlock::error(dlock::errc::backend_error, "could not replace " + path.string());
}

void break_grants(const std::string& uri, std::string_view name) {
  const auto dir = dlock::file::directory_of(dlock::uri::parse(uri));
  replace_file(dir / dlock::file::lock_file_name(name));
  const auto sem = dlock::file::semaphore_files(name);
  replace_file(dir / sem.held);
  for (std::uint32_t i = 0; fs::exists(dir / sem.slot(i)); ++i) replace_file(dir / sem.slot(i));
}

}  // namespace

DLOCK_TEST_HOOKS("file",
                 {.break_lock = [](const std::string& uri,
                                   const dlock::lease& held) { break_grants(uri, held.name()); },
                  .is_held_on_server =
                      [](const std::string& uri, std::string_view name) {
                        const auto path =
                            dlock::file::directory_of(dlock::uri::parse(uri)) / dlock::file::lock_file_name(name);
                        dlock::file::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
                        if (!fd) return false;  // never locked
                        return ::flock(fd.get(), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
                      },
                  .inspection = {.inspect = true,
                                 .list = true,
                                 .force_release = false,
                                 .owner = dlock::testing::backend_hooks::inspection_support::owner_record::host_pid}});
