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
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "lock_directory.hpp"
#include "lock_file.hpp"

namespace dlock::file {

// How a file is named in error messages: "<dir>/<file>", built only when a message is (never on a
// grant's success path, which would otherwise format a path per file per grant).
class file_label {
 public:
  file_label(const std::string& path) noexcept : path_(&path) {}  // NOLINT: a full path as it is
  file_label(const lock_directory& dir, const std::string& file_name) noexcept : dir_(&dir), path_(&file_name) {}
  std::string str() const { return dir_ ? dir_->where(*path_) : *path_; }

 private:
  const lock_directory* dir_ = nullptr;
  const std::string* path_;
};

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
// `dir`, opened (created) for this call, re-opened when the name was replaced between open and
// flock (bounded, as try_lock_file). nullopt with !ec: LOCK_NB and held in a conflicting mode.
// The held_file's token is 0 (these files carry no counter of their own).
std::optional<held_file> flock_file(const lock_directory& dir, const std::string& file_name, int operation,
                                    std::error_code& ec);

// A protocol file one rw_lock or semaphore object keeps open across its grants (the turnstile a
// reader passes, the counter file): per grant a flock, the inode check and a LOCK_UN, instead of
// open, flock, fstat, the check and close. As safe as a file opened per grant because:
//  - threads: flock does not exclude two holders of one open file description, so the object's
//    mutex is held from the flock to the LOCK_UN (and while the file is opened again);
//  - fork: a child inherits the open file description, and flock would not exclude parent and
//    child either, so a child's first use (pthread_atfork counts forks) opens its own;
//  - replacement: after every flock the name is checked against the inode, as after a fresh open,
//    and a file replaced or deleted is let go and opened again (bounded, as flock_file).
class kept_file {
 public:
  kept_file(std::shared_ptr<const lock_directory> dir, std::string file_name);

  // A flock on the kept file: LOCK_UN, then the mutex, when it ends.
  class hold {
   public:
    hold() = default;
    hold(std::unique_lock<std::mutex> guard, int fd) noexcept : guard_(std::move(guard)), fd_(fd) {}
    hold(hold&& other) noexcept : guard_(std::move(other.guard_)), fd_(std::exchange(other.fd_, -1)) {}
    hold& operator=(hold&&) = delete;
    ~hold();
    int fd() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }

   private:
    std::unique_lock<std::mutex> guard_;
    int fd_ = -1;
  };

  // flock(operation) on the kept file. An empty hold with !ec: LOCK_NB and held in a conflicting mode.
  hold lock(int operation, std::error_code& ec);
  const std::string& file_name() const noexcept { return file_name_; }
  file_label label() const noexcept { return file_label(*dir_, file_name_); }

 private:
  bool open_locked(std::error_code& ec);

  std::shared_ptr<const lock_directory> dir_;
  std::string file_name_;
  std::mutex mutex_;
  unique_fd fd_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  unsigned forks_ = 0;  // the process's fork count when fd_ was opened
};

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
  std::array<char, 36> boot_id{};  // all zeros: none stored
};

// Reads the counter file of an fd its caller holds flock(LOCK_EX) on. An empty file reads as
// all zeros. errc::backend_error for any other size than 0 or 64 bytes.
std::optional<counter_state> read_counter_file(int fd, const file_label& where, std::error_code& ec);
// The next token from `state` (as read under the same LOCK_EX), written back (and flushed when it
// passes the mark or starts a new boot). nullopt with ec on an I/O error.
std::optional<std::uint64_t> issue_token(int fd, counter_state& state, const file_label& where, std::error_code& ec);

}  // namespace dlock::file
