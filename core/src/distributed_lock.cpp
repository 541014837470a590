#include "dlock/distributed_lock.hpp"

#include <optional>
#include <thread>

#include "acquire_loop.hpp"
#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "dlock/spi.hpp"
#include "local_wait_queue.hpp"
#include "observation.hpp"
#include "or_throw.hpp"

namespace dlock {

distributed_lock::distributed_lock(std::string name, capabilities caps, lock_options options)
    : name_(std::move(name)), caps_(caps), options_(std::move(options)) {}

distributed_lock::~distributed_lock() = default;

lease distributed_lock::adopt(std::unique_ptr<spi::lease_state> state) noexcept {
  return detail::adopt(std::move(state), options_, caps_);
}

lease distributed_lock::try_acquire() {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire(ec); });
}

lease distributed_lock::try_acquire(std::error_code& ec) noexcept {
  return try_acquire_until(clock::now(), std::stop_token{}, ec);
}

lease distributed_lock::try_acquire_until(clock::time_point deadline) {
  return try_acquire_until(deadline, std::stop_token{});
}

lease distributed_lock::try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
  return try_acquire_until(deadline, std::stop_token{}, ec);
}

lease distributed_lock::try_acquire_until(clock::time_point deadline, std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire_until(deadline, std::move(stop), ec); });
}

lease distributed_lock::try_acquire_until(clock::time_point deadline, std::stop_token stop,
                                          std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  detail::observed_acquire observed(observation_, primitive_kind::mutex, name_, deadline);
  auto state = acquire_within(deadline, stop, ec);
  observed.attach(state.get());
  auto granted = adopt(std::move(state));
  observed.finish(static_cast<bool>(granted), ec);
  return granted;
}

lease distributed_lock::acquire() { return acquire(std::stop_token{}); }

lease distributed_lock::acquire(std::error_code& ec) noexcept { return acquire(std::stop_token{}, ec); }

lease distributed_lock::acquire(std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return acquire(std::move(stop), ec); });
}

lease distributed_lock::acquire(std::stop_token stop, std::error_code& ec) noexcept {
  auto l = try_acquire_until(clock::time_point::max(), std::move(stop), ec);
  if (!l && !ec) set_error(ec, errc::timeout, "lock '" + name_ + "': the backend gave up waiting");
  return l;
}

std::unique_ptr<spi::lease_state> distributed_lock::acquire_within(clock::time_point deadline,
                                                                   const std::stop_token& stop,
                                                                   std::error_code& ec) noexcept {
  return detail::acquire_within(
      deadline, stop, options_.poll, ec, "lock", name_, [this](std::error_code& e) { return do_try_acquire(e); },
      [this](clock::time_point d, std::error_code& e) { return do_acquire_until(d, e); },
      [this] { return !must_wait_in_line(); }, [this](spi::lease_state& s) { hold_in_line(s); });
}

bool distributed_lock::must_wait_in_line() const {
  // A try is one attempt and never waits; but while threads of this process wait for the name,
  // taking it past them is the overtaking the line exists to prevent (a thread that releases and
  // tries again in a loop would starve them as surely as one that acquires), so the answer is
  // "held by someone else" without asking the server. A reentrant owner's re-entry is not
  // overtaking: the waiters wait for that very owner.
  if (!line_ || !line_->has_waiters()) return false;
  try {
    return !(caps_.has(capability::reentrant) && line_->held_by(options_.owner));
  } catch (...) {
    return true;
  }
}

void distributed_lock::hold_in_line(spi::lease_state& state) noexcept {
  if (!line_ || state.local_hold_) return;
  try {
    state.local_hold_ = std::make_unique<detail::local_hold>(line_, options_.owner, caps_.has(capability::reentrant));
  } catch (...) {
    // Out of memory: the grant is fine; only its release will not wake this process's head at
    // once (the head still polls).
  }
}

std::unique_ptr<spi::release_watch> distributed_lock::do_watch_release() noexcept { return nullptr; }

std::vector<std::unique_ptr<spi::lease_state>> distributed_lock::do_try_acquire_set(std::span<distributed_lock* const>,
                                                                                    std::error_code& ec) noexcept {
  ec = make_error_code(errc::not_supported);  // asked of every set: no message to build
  return {};
}

lease distributed_lock::adopt_set_member(std::unique_ptr<spi::lease_state> state) noexcept {
  detail::observed_acquire observed(observation_, primitive_kind::mutex, name_, clock::now());
  if (state) hold_in_line(*state);
  observed.attach(state.get());
  auto granted = adopt(std::move(state));
  observed.finish(static_cast<bool>(granted), std::error_code{});
  return granted;
}

std::unique_ptr<spi::lease_state> distributed_lock::do_acquire_until(clock::time_point deadline,
                                                                     std::error_code& ec) noexcept {
  if (!line_) return poll_until(deadline, ec);
  if (caps_.has(capability::reentrant)) {
    bool reentry = false;
    try {
      reentry = line_->held_by(options_.owner);
    } catch (...) {
    }
    if (reentry) {  // the waiters wait for us: re-enter without queueing behind them
      auto state = do_try_acquire(ec);
      if (state || ec) return state;
    }
  }
  std::optional<detail::local_wait_queue::place> me;
  try {
    me.emplace(*line_);
  } catch (...) {
    return poll_until(deadline, ec);  // out of memory: wait as if alone
  }
  if (!me->wait_to_be_head(deadline)) return nullptr;  // the deadline passed, or a stop came, in line

  // The head. It asks the server at once unless the head before it just left with the lock
  // (then it is held here, and its release wakes us); between attempts it sleeps on the
  // backend's release watch, or for the backoff delay cut short by a release in this process.
  std::unique_ptr<spi::release_watch> watch;
  bool watch_asked = false;
  bool try_now = me->try_at_once();
  std::uint64_t seen = me->releases_at_head();
  for (unsigned attempt = 0;;) {
    if (spi::stop_requested()) return nullptr;  // leaving hands the head on
    if (try_now) {
      seen = me->releases_seen();
      auto state = watch ? watch->try_acquire(ec) : do_try_acquire(ec);
      if (state) {
        me->leave_with_grant();
        return state;
      }
      if (ec) return nullptr;                        // leaving hands the head on; the next one tries at once
      if (clock::now() >= deadline) return nullptr;  // that was the last attempt
      if (!watch_asked) {
        watch_asked = true;
        watch = do_watch_release();
        if (watch) continue;  // try once more, now watching: a release in between is not missed
      }
    }
    if (spi::stop_requested()) return nullptr;
    const auto now = clock::now();
    if (now >= deadline) {
      try_now = true;  // one last attempt at the deadline
      continue;
    }
    if (watch) {
      // A kernel or server wake-up: the watch wakes on any release, this process's included. The
      // cap at poll.max only bounds what a change the watch cannot see would cost.
      const auto until = deadline - now <= options_.poll.max ? deadline : now + options_.poll.max;
      watch->wait_until(until);
    } else {
      const auto delay = spi::backoff_delay(options_.poll, attempt++);
      me->wait_for_release(seen, deadline - now <= delay ? deadline : now + delay);
    }
    try_now = true;
  }
}

std::unique_ptr<spi::lease_state> distributed_lock::poll_until(clock::time_point deadline,
                                                               std::error_code& ec) noexcept {
  return detail::poll_until(deadline, options_.poll, ec, [this](std::error_code& e) { return do_try_acquire(e); });
}

}  // namespace dlock
