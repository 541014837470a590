#pragma once
// with_lock(lock, timeout, fn): folly's withWLock for a distributed lock. Acquires within
// `timeout` or throws dlock::error(errc::timeout); calls fn(const lease&) (or fn()); releases;
// returns fn's result.
//
// A release that finds the lock no longer ours throws errc::not_owner after fn returned: the
// work was not protected and the caller must know. If fn threw, fn's exception wins (the lease's
// destructor releases and reports a failed release through report_background_error).
//
// with_read_lock / with_write_lock (a rw_lock's two sides) and with_permits (a semaphore's
// permits) do the same for the other primitives, and with_locks for a set of locks (fn gets the
// const multi_lease&).
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/uri.hpp"

namespace dlock {

namespace detail {
template <class Fn, class Held>
decltype(auto) call_with_lease(Fn&& fn, const Held& l) {
  if constexpr (std::is_invocable_v<Fn&&, const Held&>)
    return std::invoke(std::forward<Fn>(fn), l);
  else
    return std::invoke(std::forward<Fn>(fn));
}

// Calls fn with the lease held, releases it (throwing not_owner when it was no longer ours),
// returns fn's result.
template <class Held, class Fn>
decltype(auto) run_holding(Held& held, Fn&& fn) {
  using result = decltype(call_with_lease(std::forward<Fn>(fn), held));
  if constexpr (std::is_void_v<result>) {
    call_with_lease(std::forward<Fn>(fn), held);
    held.release();
  } else {
    result r = call_with_lease(std::forward<Fn>(fn), held);
    held.release();
    return r;  // decltype(auto): the declared type of r, moved for values
  }
}

template <class Rep, class Period>
[[noreturn]] void throw_timeout(const std::string& what, std::chrono::duration<Rep, Period> timeout) {
  throw error(errc::timeout, "could not acquire " + what + " within " +
                                 format_duration(std::chrono::ceil<std::chrono::milliseconds>(timeout)));
}
}  // namespace detail

template <class Rep, class Period, class Fn>
decltype(auto) with_lock(distributed_lock& lock, std::chrono::duration<Rep, Period> timeout, Fn&& fn) {
  lease held = lock.try_acquire_for(timeout);
  if (!held) detail::throw_timeout("lock '" + std::string(lock.name()) + "'", timeout);
  return detail::run_holding(held, std::forward<Fn>(fn));
}

// The same on a reader-writer lock's read side (other readers may hold it too) ...
template <class Rep, class Period, class Fn>
decltype(auto) with_read_lock(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, Fn&& fn) {
  lease held = lock.try_acquire_read_for(timeout);
  if (!held) detail::throw_timeout("the read side of rw lock '" + std::string(lock.name()) + "'", timeout);
  return detail::run_holding(held, std::forward<Fn>(fn));
}

// ... on its write side (alone) ...
template <class Rep, class Period, class Fn>
decltype(auto) with_write_lock(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, Fn&& fn) {
  lease held = lock.try_acquire_write_for(timeout);
  if (!held) detail::throw_timeout("the write side of rw lock '" + std::string(lock.name()) + "'", timeout);
  return detail::run_holding(held, std::forward<Fn>(fn));
}

// ... and holding `permits` permits of a semaphore (all of them given back together).
template <class Rep, class Period, class Fn>
decltype(auto) with_permits(semaphore& sem, std::uint32_t permits, std::chrono::duration<Rep, Period> timeout,
                            Fn&& fn) {
  lease held = sem.try_acquire_for(timeout, permits);
  if (!held)
    detail::throw_timeout(std::to_string(permits) + " of the " + std::to_string(sem.max_count()) +
                              " permits of semaphore '" + std::string(sem.name()) + "'",
                          timeout);
  return detail::run_holding(held, std::forward<Fn>(fn));
}

// ... and every lock of a set (dlock/multi_lock.hpp): one timeout for the whole set, all or none.
template <class Rep, class Period, class Fn>
decltype(auto) with_locks(multi_lock& locks, std::chrono::duration<Rep, Period> timeout, Fn&& fn) {
  multi_lease held = locks.try_acquire_for(timeout);
  if (!held) {
    std::string names;
    for (const auto& n : locks.names()) names += (names.empty() ? "'" : ", '") + n + "'";
    detail::throw_timeout("the set of locks " + names, timeout);
  }
  return detail::run_holding(held, std::forward<Fn>(fn));
}

}  // namespace dlock
