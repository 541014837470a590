#pragma once
// The lock files of file://, in one place (the backend, its tests and its conformance hooks all
// use it): the mapping from lock names to file names, and the open and inode checks every file of
// the protocol goes through. What the files of a name are and what each one holds:
// name_lock.hpp (the mutex and the reader-writer lock, which share one), shared_files.hpp (the
// semaphore, and the counter layout).
//   - a name's files are <safe_key(name)>.<suffix> in the lock directory; never unlinked by dlock,
//     because they carry the fencing counters;
//   - holding = a flock on an fd opened for the grant (flock belongs to the open file description,
//     so two leases in one process exclude each other, and the kernel drops it when the holder
//     dies).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "unique_fd.hpp"

namespace dlock::file {

// Longest file name safe_key produces (without ".lock"); well under NAME_MAX (255).
inline constexpr std::size_t max_key_length = 200;
// The longest lock name accepted; longer names than max_key_length are hashed.
inline constexpr std::size_t max_name_length = 4096;

// <key>.lock for a lock name: the file of its mutex and reader-writer lock. A name made of
// [A-Za-z0-9._-], not starting with '.', and at most 200 bytes is used as it is; any other name ("a/b", "..",
// ".hidden", bytes outside that set) becomes
// '#' + a readable head + '.' + sha256(name). Distinct names never collide (Linux file names are
// case-sensitive, so "A" and "a" are two files), and no name can reach outside the directory.
std::string lock_file_name(std::string_view name);
// The <key> part alone (the same mapping), for the other files of a name, whose suffixes
// (name_lock.hpp, shared_files.hpp) never end in ".lock", so they cannot collide with its lock file.
std::string file_key(std::string_view name);

// A held lock file.
struct held_file {
  unique_fd fd;
  dev_t device = 0;
  ino_t inode = 0;
  std::uint64_t token = 0;
};

// How often an attempt starts over with a lock file replaced under it before it gives up.
inline constexpr int max_replacement_retries = 16;

// The message for an attempt that gave up after max_replacement_retries replacements.
std::string replaced_too_often(const std::string& where);

// Whether an open creates a missing file, or reports it missing (ENOENT): the files only some
// users of a name need (the turnstile, the semaphore's presence file) are not made by those who
// only look at them.
enum class if_missing { create, report };

// Opens the file `file_name` in the directory `dir_fd`, read-write, never through a symlink,
// creating it (mode 0660 minus the umask) unless told not to. An empty fd with ec set on failure.
unique_fd open_lock_file(int dir_fd, const std::string& file_name, const std::string& where, std::error_code& ec);
// The same open for callers that name the file only when it fails: `err` is its errno (0 on success),
// for set_open_error.
unique_fd open_lock_file(int dir_fd, const std::string& file_name, int& err,
                         if_missing missing = if_missing::create) noexcept;
void set_open_error(std::error_code& ec, int err, const std::string& where);

// Does the directory entry `file_name` still name the inode `fd` refers to?
bool still_names(int dir_fd, const std::string& file_name, dev_t device, ino_t inode);

}  // namespace dlock::file
