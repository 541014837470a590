#include "file_primitives.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include "dlock/acquire_stop.hpp"
#include "file_lease.hpp"

namespace dlock::file {
namespace {

std::string describe(std::string_view kind, std::string_view name, const std::exception& e) {
  return "file:// " + std::string(kind) + " '" + std::string(name) + "': " + e.what();
}

lock_side side_of(access a) { return a == access::read ? lock_side::read : lock_side::write; }

}  // namespace

file_rw_lock::file_rw_lock(std::string name, capabilities caps, lock_options options,
                           std::shared_ptr<const lock_directory> dir)
    : rw_lock(name, caps, std::move(options)), lock_(std::move(dir), std::move(name)) {}

std::unique_ptr<spi::lease_state> file_rw_lock::make_lease(held_file held) {
  return std::make_unique<file_lease>(lock_.name(), options().ttl, lock_.dir(), lock_.files().lock, std::move(held));
}

std::unique_ptr<spi::lease_state> file_rw_lock::do_try_acquire(access side, std::error_code& ec) noexcept {
  try {
    auto held = lock_.try_once(side_of(side), ec);
    return held ? make_lease(std::move(*held)) : nullptr;
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
    // gets past it; the readers inside drain, and the lock file's last close wakes the writer.
    // Re-checked at least every poll maximum, in case a change escaped the watch.
    exclusive_wait wait(lock_, options().poll);
    for (;;) {
      auto held = wait.try_lock(ec);
      if (held) {
        if (!lock_.grant(*held, lock_side::write, ec)) return nullptr;
        return make_lease(std::move(*held));
      }
      if (ec) return nullptr;
      const auto now = clock::now();
      if (now >= deadline || spi::stop_requested()) return nullptr;
      wait.wait_until(deadline - now > options().poll.max ? now + options().poll.max : deadline);
    }
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, describe("rw lock", name(), e));
    return nullptr;
  }
}

file_semaphore::file_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps,
                               lock_options options, std::shared_ptr<const lock_directory> dir)
    : semaphore(name, max_count, caps, std::move(options)),
      dir_(std::move(dir)),
      files_(semaphore_files(name)),
      lock_file_(lock_file_name(name)),
      meta_(dir_, files_.meta),
      lock_(dir_, lock_file_, if_missing::report) {}

void file_semaphore::refuse_beside_the_lock(std::error_code& ec) const {
  std::string in_use_as = "a mutex or a reader-writer lock";
  const unique_fd look(::openat(dir_->fd(), lock_file_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (look) in_use_as = lock_in_use_as(look.get());
  set_error(ec, errc::name_conflict,
            name_conflict_message(std::string(name()), in_use_as + " (" + dir_->where(lock_file_) + " is locked)",
                                  "a semaphore"));
}

std::unique_ptr<spi::lease_state> file_semaphore::do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept {
  try {
    // The counter file's lock, blocking and brief, around the whole attempt: the max_count check,
    // the slots, the look at the name's lock and the token, so grants are ordered as their tokens
    // and no two semaphore attempts look at the lock file at once (two LOCK_EX|LOCK_NB looks would
    // find each other).
    const auto where = meta_.label();
    const auto meta = meta_.lock(LOCK_EX, ec);
    if (!meta) return nullptr;
    auto state = read_counter_file(meta.fd(), where, ec);
    if (!state) return nullptr;
    if (state->extra != 0 && state->extra != max_count()) {
      set_error(ec, errc::name_conflict,
                "file:// semaphore '" + std::string(name()) + "' has " + std::to_string(state->extra) +
                    " permits (stored in " + where.str() + "); this one was made with " + std::to_string(max_count()) +
                    ": every process must use the same max_count");
      return nullptr;
    }
    state->extra = max_count();
    std::vector<named_hold> holds;
    for (std::uint32_t i = 0; i < max_count() && holds.size() < permits; ++i) {
      auto slot_name = files_.slot(i);
      auto slot = flock_file(*dir_, slot_name, LOCK_EX | LOCK_NB, ec);
      if (ec) return nullptr;  // the slots taken so far close with `holds`
      if (slot) holds.push_back({std::move(slot_name), std::move(*slot)});
    }
    if (holds.size() < permits) return nullptr;  // not enough free: give back what we took
    // One name, one lock: publish this grant (LOCK_SH on the presence file, kept while it lives),
    // then look at the name's lock file. A LOCK_EX there, while we look, is a grant of the lock
    // looking at us (name_lock.hpp): it holds the lock file too.
    auto presence = flock_file(*dir_, files_.held, LOCK_SH | LOCK_NB, ec);
    if (ec) return nullptr;
    if (!presence) {
      refuse_beside_the_lock(ec);
      return nullptr;
    }
    holds.push_back({files_.held, std::move(*presence)});
    {
      const auto look = lock_.lock(LOCK_EX | LOCK_NB, ec);
      if (ec) return nullptr;
      if (!look && !look.missing()) {
        refuse_beside_the_lock(ec);
        return nullptr;  // withdrawn: the slots and the presence close with `holds`
      }
    }
    const auto token = issue_token(meta.fd(), *state, where, ec);
    if (!token) return nullptr;
    return std::make_unique<file_lease>(std::string(name()), options().ttl, dir_, std::move(holds), *token);
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, describe("semaphore", name(), e));
    return nullptr;
  }
}

}  // namespace dlock::file
