#pragma once
// The files of a name besides its lock file, and the counter layout they share.
//
// Files, <key> = file_key(name) as for the lock file (lock_file.hpp); every suffix ends
// differently from ".lock" and from each other, so no two (kind, name, slot) ever share a file:
//   <key>.lock        the lock of the name's mutex and reader-writer lock, and their fencing
//                     counter (name_lock.hpp)
//   <key>.rw-gate     the turnstile of the name's writers and mutex (name_lock.hpp)
//   <key>.rw-fence    the readers' turn at the counter (name_lock.hpp)
//   <key>.sem         the semaphore's counter_file, which also stores its max_count
//   <key>.sem.<i>     permit slot i (0 <= i < max_count): held = flock(LOCK_EX) on it
//   <key>.sem-held    the semaphore's presence: every permit grant holds flock(LOCK_SH) on it while
//                     it lives, so the name's lock sees the semaphore is in use (name_lock.hpp)
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

// The files of a name's lock, which its mutex and reader-writer lock share.
struct rw_file_names {
  std::string lock, gate, turn;
};
rw_file_names rw_files(std::string_view name);

struct semaphore_file_names {
  std::string meta;
  std::string held;
  std::string slot_prefix;  // + std::to_string(i)
  std::string slot(std::uint32_t i) const { return slot_prefix + std::to_string(i); }
};
semaphore_file_names semaphore_files(std::string_view name);

// One attempt at flock(operation) (LOCK_SH or LOCK_EX, with LOCK_NB or without) on `file_name` in
// `dir`, opened (created) for this call, then checked to be a regular file the name still refers to
// (the unlink race: a file replaced between open and flock is opened again, bounded by
// max_replacement_retries). nullopt with !ec: LOCK_NB and held in a conflicting mode. The
// held_file's token is 0 (set by whoever counts the grant).
std::optional<held_file> flock_file(const lock_directory& dir, const std::string& file_name, int operation,
                                    std::error_code& ec);
// The same for a file that is not created if missing: `missing` says it was.
struct flock_outcome {
  std::optional<held_file> held;
  bool missing = false;
};
flock_outcome flock_file(const lock_directory& dir, const std::string& file_name, int operation, if_missing missing,
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
//  - a file kept with if_missing::report is not created: while it does not exist, every use
//    looks for it again (one failed openat) and reports it missing.
class kept_file {
 public:
  kept_file(std::shared_ptr<const lock_directory> dir, std::string file_name, if_missing missing = if_missing::create);

  // A flock on the kept file: LOCK_UN, then the mutex, when it ends.
  class hold {
   public:
    hold() = default;
    hold(std::unique_lock<std::mutex> guard, int fd) noexcept : guard_(std::move(guard)), fd_(fd) {}
    hold(hold&& other) noexcept
        : guard_(std::move(other.guard_)), fd_(std::exchange(other.fd_, -1)), missing_(other.missing_) {}
    hold& operator=(hold&&) = delete;
    ~hold();
    static hold file_missing() noexcept {
      hold h;
      h.missing_ = true;
      return h;
    }
    int fd() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    // Empty because the file does not exist (if_missing::report).
    bool missing() const noexcept { return missing_; }

   private:
    std::unique_lock<std::mutex> guard_;
    int fd_ = -1;
    bool missing_ = false;
  };

  // flock(operation) on the kept file. An empty hold with !ec: LOCK_NB and held in a conflicting
  // mode, or missing().
  hold lock(int operation, std::error_code& ec);
  const std::string& file_name() const noexcept { return file_name_; }
  file_label label() const noexcept { return file_label(*dir_, file_name_); }

 private:
  // false with !ec: the file is missing (if_missing::report).
  bool open_locked(std::error_code& ec);

  std::shared_ptr<const lock_directory> dir_;
  std::string file_name_;
  if_missing missing_;
  std::mutex mutex_;
  unique_fd fd_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  unsigned forks_ = 0;  // the process's fork count when fd_ was opened
};

// A counter file (<key>.lock, <key>.sem): 64 bytes, all little-endian,
//   [0, 8)   the last fencing token handed out
//   [8, 16)  the reserved high-water mark: on disk (fdatasync'ed) before any token above the
//            previous mark is handed out, so every token ever handed out is <= the mark on disk
//   [16, 24) in <key>.sem, its max_count (0: none stored); in <key>.lock, what its latest grant
//            was (lock_kind in name_lock.hpp), for the messages of a refused semaphore
//   [24, 60) the boot id (/proc/sys/kernel/random/boot_id) of the boot that wrote [0, 8)
// Why a grant need not fdatasync: it would serialise every reader behind a disk flush. The
// page cache is shared by every process of the boot and survives their deaths, so within one
// boot the unsynced [0, 8) is exact; only an OS crash loses it, and that changes the boot id, so
// the first grant of a new boot continues from the mark on disk instead. A flush once per
// counter_reserve tokens keeps the mark ahead. Without a boot id (no /proc) every grant flushes,
// and so does every grant of the mutex (whose counter older versions kept as [0, 8) alone,
// flushed per grant: a process of such a version on the same name counts on in [0, 8)).
inline constexpr std::uint64_t counter_reserve = 4096;

struct counter_state {
  std::uint64_t last = 0;
  std::uint64_t reserved = 0;
  std::uint64_t extra = 0;         // [16, 24): max_count, or the kind of the latest grant
  std::array<char, 36> boot_id{};  // all zeros: none stored
  bool laid_out = false;           // the file had the 64 bytes (not empty, not an older 8-byte counter)
};

// Whether a counter file may hold the 8-byte counter of older versions (<key>.lock).
enum class older_counter { refused, accepted };

// Reads the counter file of an fd whose counter its caller may change (the flock that orders its
// updates is held). An empty file reads as all zeros; with older_counter::accepted, an 8-byte file
// as that counter in `last`. errc::backend_error for any other size.
std::optional<counter_state> read_counter_file(int fd, const file_label& where, std::error_code& ec,
                                               older_counter older = older_counter::refused);
// The next token from `state` (as read under the same flock), written back with the 64 bytes
// (and flushed when it passes the mark, starts a new boot, or `flush_always`). nullopt with ec on
// an I/O error.
std::optional<std::uint64_t> issue_token(int fd, counter_state& state, const file_label& where, std::error_code& ec,
                                         bool flush_always = false);

}  // namespace dlock::file
