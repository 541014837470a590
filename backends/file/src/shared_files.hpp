#pragma once
// The on-disk protocol of file://'s reader-writer lock and semaphore (the mutex's is lock_file.hpp).
//
// Files, <key> = file_key(name) as for the mutex; every suffix ends differently from ".lock" and
// from each other, so no two (kind, name, slot) ever share a file:
//   <key>.rw          the lock: readers hold flock(LOCK_SH), a writer flock(LOCK_EX)
//   <key>.rw-gate     the turnstile: a writer holds LOCK_EX from before it tries <key>.rw until it
//                     has it, so while a writer waits, a new reader's LOCK_SH|LOCK_NB on the gate
//                     fails (writer preference, which Linux flock alone does not give)
//   <key>.rw-fence    the fencing counter of the reader-writer lock (counter_file below)
//   <key>.sem         the semaphore's counter_file, which also stores its max_count
//   <key>.sem.<i>     permit slot i (0 <= i < max_count): held = flock(LOCK_EX) on it
// None is ever unlinked by dlock (the counters must survive; see lock_file.hpp for the unlink race).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "lock_file.hpp"

namespace dlock::file {

struct rw_file_names {
  std::string lock, gate, fence;
};
rw_file_names rw_files(std::string_view name);

struct semaphore_file_names {
  std::string meta;
  std::string slot_prefix;  // + std::to_string(i)
  std::string slot(std::uint32_t i) const { return slot_prefix + std::to_string(i); }
};
semaphore_file_names semaphore_files(std::string_view name);

// One attempt at flock(operation) (LOCK_SH or LOCK_EX, with LOCK_NB or without) on `file_name` in
// `dir_fd`, opened (created) for this call, re-opened when the name was replaced between open and
// flock (bounded, as try_lock_file). nullopt with !ec: LOCK_NB and held in a conflicting mode.
// The held_file's token is 0 (these files carry no counter of their own).
std::optional<held_file> flock_file(int dir_fd, const std::string& file_name, const std::string& where, int operation,
                                    std::error_code& ec);

// A counter file (<key>.rw-fence, <key>.sem): 64 bytes, all little-endian,
//   [0, 8)   the last fencing token handed out
//   [8, 16)  the reserved high-water mark: on disk (fdatasync'ed) before any token above the
//            previous mark is handed out, so every token ever handed out is <= the mark on disk
//   [16, 24) the semaphore's max_count (0: none stored; the rw lock stores none)
//   [24, 60) the boot id (/proc/sys/kernel/random/boot_id) of the boot that wrote [0, 8)
// Why not the mutex's fdatasync per grant: it serialises every reader behind a disk flush. The
// page cache is shared by every process of the boot and survives their deaths, so within one
// boot the unsynced [0, 8) is exact; only an OS crash loses it, and that changes the boot id, so
// the first grant of a new boot continues from the mark on disk instead. A flush once per
// counter_reserve tokens keeps the mark ahead. Without a boot id (no /proc) every grant flushes.
inline constexpr std::uint64_t counter_reserve = 4096;

struct counter_state {
  std::uint64_t last = 0;
  std::uint64_t reserved = 0;
  std::uint64_t max_count = 0;
  std::string boot_id;
};

// Reads the counter file of an fd its caller holds flock(LOCK_EX) on. An empty file reads as
// all zeros. errc::backend_error for any other size than 0 or 64 bytes.
std::optional<counter_state> read_counter_file(int fd, const std::string& where, std::error_code& ec);
// The next token from `state` (as read under the same LOCK_EX), written back (and flushed when it
// passes the mark or starts a new boot). nullopt with ec on an I/O error.
std::optional<std::uint64_t> issue_token(int fd, counter_state& state, const std::string& where, std::error_code& ec);

}  // namespace dlock::file
