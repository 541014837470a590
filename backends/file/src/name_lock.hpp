#pragma once
// The one lock of a name, which its mutex and its reader-writer lock share (one name, one lock):
//
//   <key>.lock     the lock: a reader holds flock(LOCK_SH), a writer and the mutex flock(LOCK_EX),
//                  each on an fd of its own; so the mutex is a writer of the name, and a
//                  `flock -s` / `flock -x` on this file is a reader / writer (or mutex) of it.
//                  Also the name's fencing counter (counter_file in shared_files.hpp): every grant
//                  of any kind takes the next token, so they form one rising sequence.
//   <key>.rw-gate  the turnstile (writer preference, which Linux flock alone does not give): a
//                  waiting writer or mutex holds LOCK_EX from its first attempt until it has the
//                  lock, so a reader arriving meanwhile fails its LOCK_SH|LOCK_NB there ("held")
//                  and the readers inside drain. Created by the first writer or mutex that waits;
//                  while it does not exist nobody waits, and everyone passes.
//   <key>.rw-fence the readers' turn at the counter: a read grant holds LOCK_EX on it around its
//                  semaphore check and its token (readers share the lock, so the lock does not
//                  order them; a writer or mutex holding LOCK_EX on the lock is alone anyway).
//                  Older versions kept the reader-writer lock's counter in it: it is read once,
//                  when the lock file is not yet in the 64-byte layout, so tokens continue above it.
//
// A semaphore of the name never holds beside it (shared_files.hpp: <key>.sem-held). Each side
// publishes itself before it looks for the other, so two racing acquirers of different kinds may
// both be refused but never both granted: a grant of the lock looks, once its flock on the lock
// file is held (and, for a reader, inside its turn, so no two of them look at once), whether
// <key>.sem-held takes LOCK_EX|LOCK_NB (every permit holder keeps LOCK_SH on it); a semaphore,
// once its slots and its LOCK_SH on <key>.sem-held are held (and inside its counter's LOCK_EX, so
// no two of them look at once), whether the lock file takes LOCK_EX|LOCK_NB. Whoever finds the
// other gives back what it took and is refused with errc::name_conflict.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "dlock/lock_options.hpp"
#include "lock_directory.hpp"
#include "lock_file.hpp"
#include "lock_file_watch.hpp"
#include "shared_files.hpp"

namespace dlock::file {

// Who takes the lock of a name.
enum class lock_side { read, write, mutex };

// What the lock file's counter records of its latest grant ([16, 24)), for a refused semaphore's
// message. 0: nothing recorded (a new file, or one an older version counted in).
enum class lock_kind : std::uint64_t { none = 0, mutex = 1, reader_writer = 2 };

class name_lock {
 public:
  name_lock(std::shared_ptr<const lock_directory> dir, std::string name);

  // One attempt, without waiting: the turnstile (a reader passes it; a writer or mutex holds it for
  // the attempt), the lock file (LOCK_SH or LOCK_EX, non-blocking), then grant(). nullopt with
  // !ec: held (or a writer or mutex waits), or errc::name_conflict.
  std::optional<held_file> try_once(lock_side side, std::error_code& ec);

  // The grant on `held`, the lock file flock'ed for `side` (by try_once or an exclusive_wait): the
  // semaphore check, then the next token into held.token. false with ec: errc::name_conflict when
  // the name's semaphore has permits held (the caller closes `held`, which gives the flock back),
  // or an I/O error.
  bool grant(held_file& held, lock_side side, std::error_code& ec);

  const std::string& name() const noexcept { return name_; }
  const std::shared_ptr<const lock_directory>& dir() const noexcept { return dir_; }
  const rw_file_names& files() const noexcept { return files_; }

 private:
  std::shared_ptr<const lock_directory> dir_;
  std::string name_;
  rw_file_names files_;
  kept_file gate_;       // a reader's pass (not created: missing, nobody waits)
  kept_file turn_;       // the readers' turn
  kept_file semaphore_;  // <key>.sem-held, looked at (not created)
};

// How a waiting writer or mutex waits: it takes the turnstile as soon as it is free and keeps it,
// and attempts the lock file through a watch (lock_file_watch.hpp) that wakes it when the file is
// closed: a reader's or holder's release or death, in any process, and the turnstile's holder
// taking the lock and letting it go. Without inotify (the kernel refused it) it polls with
// backoff instead.
class exclusive_wait {
 public:
  using clock = std::chrono::steady_clock;

  exclusive_wait(const name_lock& lock, backoff_policy poll);

  // One attempt: the turnstile unless already ours (creating it), then LOCK_EX|LOCK_NB on the lock
  // file. nullopt with !ec: not yet. The held file goes to name_lock::grant.
  std::optional<held_file> try_lock(std::error_code& ec);
  // Until the lock file may have been released, or until `until`.
  void wait_until(clock::time_point until) noexcept;

 private:
  const name_lock& lock_;
  backoff_policy poll_;
  std::optional<held_file> gate_;
  std::optional<lock_file_watch> watch_;
  unsigned polls_ = 0;
};

// What the lock file `lock_fd` of `name` is held as, for the message of a semaphore refused beside
// it: "a reader-writer lock" while readers hold it, else what its latest grant recorded.
std::string lock_in_use_as(int lock_fd);

// The message of errc::name_conflict: "lock 'NAME' is in use as IN_USE_AS; WANTED of the same name
// cannot be taken: use another name".
std::string name_conflict_message(const std::string& name, const std::string& in_use_as, const std::string& wanted);

}  // namespace dlock::file
