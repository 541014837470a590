#include "file_primitives.hpp"

#include <sys/file.h>

#include <thread>

#include "lock_file_watch.hpp"

namespace dlock::file {

shared_file_lease::shared_file_lease(std::string name, std::chrono::milliseconds ttl,
                                     std::shared_ptr<const lock_directory> dir, std::vector<named_hold> holds,
                                     std::uint64_t token)
    : lease_state(std::move(name), ttl, clock::time_point::max()),
      dir_(std::move(dir)),
      holds_(std::move(holds)),
      token_(token) {}

void shared_file_lease::do_release(std::error_code& ec) noexcept {
  try {
    for (const auto& h : holds_) {
      if (still_names(dir_->fd(), h.file_name, h.held.device, h.held.inode)) continue;
      set_error(ec, errc::not_owner,
                "file:// '" + name() + "': " + dir_->where(h.file_name) +
                    " was deleted or replaced while held, so another process may hold the new file");
      break;
    }
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
  holds_.clear();  // closing the fds drops the flocks
}

namespace {

// Sleeps the backoff delay of `attempt`, or to the deadline if that comes first; false when the
// deadline has passed (nothing left to wait for).
bool back_off(const backoff_policy& poll, unsigned attempt, std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline) return false;
  const auto delay = spi::backoff_delay(poll, attempt);
  if (deadline - now <= delay) {
    std::this_thread::sleep_until(deadline);
  } else {
    std::this_thread::sleep_for(delay);
  }
  return true;
}

std::string describe(std::string_view kind, std::string_view name, const std::exception& e) {
  return "file:// " + std::string(kind) + " '" + std::string(name) + "': " + e.what();
}

}  // namespace

file_rw_lock::file_rw_lock(std::string name, capabilities caps, lock_options options,
                           std::shared_ptr<const lock_directory> dir)
    : rw_lock(name, caps, std::move(options)), dir_(std::move(dir)), files_(rw_files(name)) {}

std::optional<held_file> file_rw_lock::take(const std::string& file_name, int operation, std::error_code& ec) const {
  return flock_file(dir_->fd(), file_name, dir_->where(file_name), operation, ec);
}

std::unique_ptr<spi::lease_state> file_rw_lock::try_once(access side, std::error_code& ec) {
  // The turnstile: a writer holds it exclusively from its first attempt to its grant; a reader
  // passes it shared, so it is stopped only by a writer there (held, not an error).
  auto gate = take(files_.gate, (side == access::read ? LOCK_SH : LOCK_EX) | LOCK_NB, ec);
  if (!gate) return nullptr;
  // A reader that passed lets go at once: the turnstile only orders arrivals (the lock itself
  // excludes), and the shorter a reader holds it, the sooner a writer finds it free to take.
  if (side == access::read) gate.reset();
  auto held = take(files_.lock, (side == access::read ? LOCK_SH : LOCK_EX) | LOCK_NB, ec);
  if (!held) return nullptr;
  return grant(std::move(*held), ec);
  // A writer's gate closes on return: readers may pass the turnstile (and find its LOCK_EX).
}

std::unique_ptr<spi::lease_state> file_rw_lock::grant(held_file held, std::error_code& ec) {
  // The token, under the counter's lock (taken blocking: every holder keeps it for a 64-byte read
  // and write, and a flush once per counter_reserve grants), after the grant's own flock: a grant
  // that begins after another one ended (a writer after anyone, anyone after a writer) gets a
  // higher token. Read grants that overlap may be numbered in either order.
  const auto where = dir_->where(files_.fence);
  auto fence = take(files_.fence, LOCK_EX, ec);
  if (!fence) return nullptr;
  auto state = read_counter_file(fence->fd.get(), where, ec);
  if (!state) return nullptr;
  const auto token = issue_token(fence->fd.get(), *state, where, ec);
  if (!token) return nullptr;
  fence.reset();  // the next grant may be counted
  std::vector<named_hold> holds;
  holds.push_back({files_.lock, std::move(held)});
  return std::make_unique<shared_file_lease>(std::string(name()), options().ttl, dir_, std::move(holds), *token);
}

std::unique_ptr<spi::lease_state> file_rw_lock::do_try_acquire(access side, std::error_code& ec) noexcept {
  try {
    return try_once(side, ec);
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, describe("rw lock", name(), e));
    return nullptr;
  }
}

std::unique_ptr<spi::lease_state> file_rw_lock::do_acquire_until(access side, clock::time_point deadline,
                                                                 std::error_code& ec) noexcept {
  if (side == access::read) return rw_lock::do_acquire_until(side, deadline, ec);
  try {
    // Writer preference across processes: once this writer has the turnstile, no new reader
    // gets past it; the readers inside drain, and the writer's next attempt gets the lock.
    std::optional<held_file> gate;
    for (unsigned attempt = 0;; ++attempt) {
      gate = take(files_.gate, LOCK_EX | LOCK_NB, ec);
      if (gate || ec) break;
      if (!back_off(options().poll, attempt, deadline)) return nullptr;
    }
    if (ec) return nullptr;
    // Then the lock, with the turnstile held: asleep in the kernel until the lock file is closed by
    // a leaving reader (or a dying one), as the mutex's waiting head (lock_file_watch.hpp), with
    // attempts through the watch's own fd; re-checked at least every poll maximum. Without
    // inotify, polling with backoff.
    std::optional<lock_file_watch> watch;
    try {
      watch.emplace(*dir_, files_.lock);
    } catch (const std::system_error&) {
    }
    for (unsigned attempt = 0;; ++attempt) {
      auto held = watch ? watch->try_flock(LOCK_EX, ec) : take(files_.lock, LOCK_EX | LOCK_NB, ec);
      if (held) return grant(std::move(*held), ec);
      if (ec) return nullptr;
      if (!watch) {
        if (!back_off(options().poll, attempt, deadline)) return nullptr;
        continue;
      }
      const auto now = clock::now();
      if (now >= deadline) return nullptr;
      watch->wait_until(deadline - now > options().poll.max ? now + options().poll.max : deadline);
    }
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, describe("rw lock", name(), e));
    return nullptr;
  }
}

file_semaphore::file_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                               std::shared_ptr<const lock_directory> dir)
    : semaphore(name, max_count, caps, std::move(options)), dir_(std::move(dir)), files_(semaphore_files(name)) {}

std::unique_ptr<spi::lease_state> file_semaphore::do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept {
  try {
    // The counter file's lock, blocking and brief, around the whole attempt: the max_count check,
    // the slots and the token, so grants are ordered as their tokens.
    const auto where = dir_->where(files_.meta);
    auto meta = flock_file(dir_->fd(), files_.meta, where, LOCK_EX, ec);
    if (!meta) return nullptr;
    auto state = read_counter_file(meta->fd.get(), where, ec);
    if (!state) return nullptr;
    if (state->max_count != 0 && state->max_count != max_count()) {
      set_error(ec, errc::invalid_argument,
                "file:// semaphore '" + std::string(name()) + "' has " + std::to_string(state->max_count) +
                    " permits (stored in " + where + "); this one was made with " + std::to_string(max_count()) +
                    ": every process must use the same max_count");
      return nullptr;
    }
    state->max_count = max_count();
    std::vector<named_hold> slots;
    for (std::uint32_t i = 0; i < max_count() && slots.size() < permits; ++i) {
      auto slot_name = files_.slot(i);
      auto slot = flock_file(dir_->fd(), slot_name, dir_->where(slot_name), LOCK_EX | LOCK_NB, ec);
      if (ec) return nullptr;  // the slots taken so far close with `slots`
      if (slot) slots.push_back({std::move(slot_name), std::move(*slot)});
    }
    if (slots.size() < permits) return nullptr;  // not enough free: give back what we took
    const auto token = issue_token(meta->fd.get(), *state, where, ec);
    if (!token) return nullptr;
    return std::make_unique<shared_file_lease>(std::string(name()), options().ttl, dir_, std::move(slots), *token);
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, describe("semaphore", name(), e));
    return nullptr;
  }
}

}  // namespace dlock::file
