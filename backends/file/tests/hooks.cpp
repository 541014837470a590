// Conformance hooks for file://.
//     For a reader-writer lock or a semaphore of the name, the same for <key>.rw and each existing
//     <key>.sem.<i> (empty files): every grant of the name is broken, as memory's break does.
//   is_held_on_server: a LOCK_SH|LOCK_NB flock from a fresh fd conflicts with any held LOCK_EX.
//   break_lock: what an operator would do, since nothing can take a kernel lock from a live holder:
//     replace the lock file (new inode, same fencing counter) with an atomic rename. The next
//     acquirer locks the new file; the holder cannot notice (file:// declares no lost_notification)
//     and its release reports not_owner.
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

std::filesystem::path lock_path(const std::string& uri_text, std::string_view name) {
  return dlock::file::directory_of(dlock::uri::parse(uri_text)) / dlock::file::lock_file_name(name);
}

// Replaces the empty file `path`, if it exists, with a new empty inode (atomic rename).
void replace_empty_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return;
  const auto temp = path.parent_path() / (".break-" + dlock::spi::random_token());
  dlock::file::unique_fd fd(::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660));
  if (!fd || std::rename(temp.c_str(), path.c_str()) != 0)
    throw dlock::error(dlock::errc::backend_error, "could not replace " + path.string());
}

void break_shared_grants(const std::string& uri, std::string_view name) {
  const auto dir = dlock::file::directory_of(dlock::uri::parse(uri));
  replace_empty_file(dir / dlock::file::rw_files(name).lock);
  const auto sem = dlock::file::semaphore_files(name);
  for (std::uint32_t i = 0; std::filesystem::exists(dir / sem.slot(i)); ++i) replace_empty_file(dir / sem.slot(i));
}

}  // namespace

DLOCK_TEST_HOOKS("file",
                 {.break_lock =
                      [](const std::string& uri, const dlock::lease& held) {
                        const auto path = lock_path(uri, held.name());
                        dlock::file::unique_fd old_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
                        std::error_code ec;
                        std::uint64_t counter = 0;
                        if (old_fd) counter = dlock::file::read_counter(old_fd.get(), path.string(), ec).value_or(0);
                        // '.'-prefixed names are never lock files (lock_file_name never yields one).
                        const auto temp = path.parent_path() / (".break-" + dlock::spi::random_token());
                        dlock::file::unique_fd fd(::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660));
                        unsigned char bytes[8];
                        for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(counter >> (8 * i));
                        if (!fd || ::pwrite(fd.get(), bytes, 8, 0) != 8 || ::fsync(fd.get()) != 0 ||
                            std::rename(temp.c_str(), path.c_str()) != 0)
                          throw dlock::error(dlock::errc::backend_error, "could not replace " + path.string());
                        break_shared_grants(uri, held.name());
                      },
                  .is_held_on_server =
                      [](const std::string& uri, std::string_view name) {
                        const auto path = lock_path(uri, name);
                        dlock::file::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
                        if (!fd) return false;  // never locked
                        return ::flock(fd.get(), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
                      }});
