#include "name_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <thread>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock::file {
namespace {

// The counter an older version kept for the reader-writer lock in <key>.rw-fence, so that the
// first grant of the lock file's 64-byte layout continues above every token it handed out (its
// mark is at or above them all, whatever boot wrote it). 0 when there is none.
std::uint64_t older_rw_counter(const lock_directory& dir, const std::string& file_name) {
  unique_fd fd(::openat(dir.fd(), file_name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return 0;
  std::error_code ignored;  // not one of ours (or unreadable): nothing to continue from
  const auto state = read_counter_file(fd.get(), file_label(dir, file_name), ignored);
  return state ? std::max(state->last, state->reserved) : 0;
}

}  // namespace

name_lock::name_lock(std::shared_ptr<const lock_directory> dir, std::string name)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      files_(rw_files(name_)),
      gate_(dir_, files_.gate, if_missing::report),
      turn_(dir_, files_.turn),
      semaphore_(dir_, semaphore_files(name_).held, if_missing::report) {}

std::optional<held_file> name_lock::try_once(lock_side side, std::error_code& ec) {
  // The turnstile. A reader passes it shared and lets go at once (the hold is a temporary): it is
  // stopped only by a writer or mutex waiting there (held, not an error), and the shorter it holds
  // it, the sooner such a waiter finds it free to take; so its pass uses the object's kept file. A
  // writer's or mutex's try holds it exclusively for the attempt, on an open file description of
  // its own (the readers' kept one conflicts with it). Missing: nobody has ever waited there.
  if (side == lock_side::read) {
    if (auto pass = gate_.lock(LOCK_SH | LOCK_NB, ec); !pass && !pass.missing()) return std::nullopt;
    auto held = flock_file(*dir_, files_.lock, LOCK_SH | LOCK_NB, ec);
    if (!held || !grant(*held, side, ec)) return std::nullopt;
    return held;
  }
  const auto gate = flock_file(*dir_, files_.gate, LOCK_EX | LOCK_NB, if_missing::report, ec);
  if (!gate.held && !gate.missing) return std::nullopt;
  auto held = flock_file(*dir_, files_.lock, LOCK_EX | LOCK_NB, ec);
  if (!held || !grant(*held, side, ec)) return std::nullopt;
  return held;
  // The gate closes on return: readers may pass the turnstile (and find the lock's LOCK_EX).
}

bool name_lock::grant(held_file& held, lock_side side, std::error_code& ec) {
  // Readers take their turn: they share the lock, so it does not keep two of them from the
  // counter, or from looking at the semaphore's file at once (two LOCK_EX|LOCK_NB looks would
  // find each other and be taken for a semaphore). A writer or mutex holds the lock alone.
  std::optional<kept_file::hold> turn;
  if (side == lock_side::read) {
    turn.emplace(turn_.lock(LOCK_EX, ec));
    if (!*turn) return false;
  }
  // One name, one lock: our flock on the lock file is published; now look for permit holders.
  {
    const auto look = semaphore_.lock(LOCK_EX | LOCK_NB, ec);
    if (ec) return false;
    if (!look && !look.missing()) {
      set_error(ec, errc::name_conflict,
                name_conflict_message(name_, "a semaphore (its permit holders flock " + semaphore_.label().str() + ")",
                                      side == lock_side::mutex ? "a mutex" : "a reader-writer lock"));
      return false;
    }
  }
  // The token, after the grant's own flock: a grant that begins after another one ended (a writer
  // or mutex after anyone, anyone after a writer or mutex) gets a higher token. Read grants that
  // overlap may be numbered in either order.
  const file_label where(*dir_, files_.lock);
  auto state = read_counter_file(held.fd.get(), where, ec, older_counter::accepted);
  if (!state) return false;
  if (!state->laid_out) state->last = std::max(state->last, older_rw_counter(*dir_, files_.turn));
  state->extra = static_cast<std::uint64_t>(side == lock_side::mutex ? lock_kind::mutex : lock_kind::reader_writer);
  // The mutex flushes every grant, as it always has: a process of an older version on the same
  // name trusts [0, 8) on disk after a crash (shared_files.hpp).
  const auto token = issue_token(held.fd.get(), *state, where, ec, side == lock_side::mutex);
  if (!token) return false;
  held.token = *token;
  return true;
}

exclusive_wait::exclusive_wait(const name_lock& lock, backoff_policy poll) : lock_(lock), poll_(poll) {
  try {
    watch_.emplace(*lock.dir(), lock.files().lock);
  } catch (const std::system_error&) {
    // No inotify instance or watch left: poll.
  }
}

std::optional<held_file> exclusive_wait::try_lock(std::error_code& ec) {
  if (!gate_) {
    gate_ = flock_file(*lock_.dir(), lock_.files().gate, LOCK_EX | LOCK_NB, ec);
    if (!gate_) return std::nullopt;  // another writer or mutex waits there: after it, then
  }
  if (watch_) return watch_->try_flock(LOCK_EX, ec);
  return flock_file(*lock_.dir(), lock_.files().lock, LOCK_EX | LOCK_NB, ec);
}

void exclusive_wait::wait_until(clock::time_point until) noexcept {
  if (watch_) {
    watch_->wait_until(until);
    return;
  }
  const auto now = clock::now();
  const auto delay = spi::backoff_delay(poll_, polls_++);
  (void)spi::sleep_until(until - now <= delay ? until : now + delay);  // or a stop request
}

std::string lock_in_use_as(int lock_fd) {
  if (::flock(lock_fd, LOCK_SH | LOCK_NB) == 0) {  // no LOCK_EX: readers hold it
    ::flock(lock_fd, LOCK_UN);
    return "a reader-writer lock";
  }
  std::array<unsigned char, 24> bytes{};
  if (::pread(lock_fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size())) {
    if (bytes[16] == static_cast<unsigned char>(lock_kind::mutex)) return "a mutex";
    if (bytes[16] == static_cast<unsigned char>(lock_kind::reader_writer)) return "a reader-writer lock";
  }
  return "a mutex or a reader-writer lock (or another program flocks its file)";
}

std::string name_conflict_message(const std::string& name, const std::string& in_use_as, const std::string& wanted) {
  return "lock '" + name + "' is in use as " + in_use_as + "; " + wanted +
         " of the same name cannot be taken: use another name";
}

}  // namespace dlock::file
