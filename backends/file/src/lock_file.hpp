#pragma once
// The on-disk protocol of file://, in one place (the backend, its tests and its conformance hooks
// all use it):
//   - one lock file per lock name, <safe_key(name)>.lock, in the lock directory; never unlinked
//     by dlock, because it carries the fencing counter;
//   - holding = flock(LOCK_EX) on an fd opened for this lease (flock belongs to the open file
//     description, so two leases in one process exclude each other, and the kernel drops it when
//     the holder dies);
//   - bytes 0..7: the last fencing token handed out, a 64-bit little-endian counter, incremented
//     and fsync'ed by each new holder while it holds the flock.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "unique_fd.hpp"

namespace dlock::file {

// Longest file name safe_key produces (without ".lock"); well under NAME_MAX (255).
inline constexpr std::size_t max_key_length = 200;
// The longest lock name accepted; longer names than max_key_length are hashed.
inline constexpr std::size_t max_name_length = 4096;

// <key>.lock for a lock name. A name made of [A-Za-z0-9._-], not starting with '.', and at most
// 200 bytes is used as it is; any other name ("a/b", "..", ".hidden", bytes outside that set) becomes
// '#' + a readable head + '.' + sha256(name). Distinct names never collide (Linux file names are
// case-sensitive, so "A" and "a" are two files), and no name can reach outside the directory.
std::string lock_file_name(std::string_view name);
// The <key> part alone (the same mapping), for the files of the other primitives, whose suffixes
// (shared_files.hpp) never end in ".lock", so they cannot collide with a mutex's file.
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

// Opens (creating it if need be) the lock file `file_name` in the directory `dir_fd`, read-write,
// never through a symlink. An empty fd with ec set on failure.
unique_fd open_lock_file(int dir_fd, const std::string& file_name, const std::string& where, std::error_code& ec);

// What one flock attempt on an opened lock file gave: the held file (the fd moved into it), or
// nothing with `replaced` (the name no longer refers to the locked inode: open the file again),
// or nothing with !ec (another open file description holds it), or ec.
struct lock_outcome {
  std::optional<held_file> held;
  bool replaced = false;
};
// flock(LOCK_EX|LOCK_NB) on `fd`, then the checks and the counter of a new grant. On anything
// but a grant, `fd` is left open and unlocked.
lock_outcome lock_opened_file(unique_fd& fd, int dir_fd, const std::string& file_name, const std::string& where,
                              std::error_code& ec);

// One attempt at the lock file `file_name` in the directory `dir_fd`. nullopt with !ec: another
// open file description holds it. Re-checks after flock that the name still refers to the inode it
// locked (a lock file deleted or replaced in between is retried), then bumps the counter.
std::optional<held_file> try_lock_file(int dir_fd, const std::string& file_name, const std::string& where,
                                       std::error_code& ec);

// Does the directory entry `file_name` still name the inode `fd` refers to?
bool still_names(int dir_fd, const std::string& file_name, dev_t device, ino_t inode);

// The counter stored in an open lock file (0 for a new, empty file). errc::backend_error for a
// file that is neither empty nor at least 8 bytes long.
std::optional<std::uint64_t> read_counter(int fd, const std::string& where, std::error_code& ec);

}  // namespace dlock::file
