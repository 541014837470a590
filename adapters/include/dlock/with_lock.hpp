#pragma once
// with_lock(lock, timeout, fn): folly's withWLock for a distributed lock. Acquires within
// `timeout` or throws dlock::error(errc::timeout); calls fn(const lease&) (or fn()); releases;
// returns fn's result.
//
// A release that finds the lock no longer ours throws errc::not_owner after fn returned: the
// work was not protected and the caller must know. If fn threw, fn's exception wins (the lease's
// destructor releases and reports a failed release through report_background_error).
#include <chrono>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "dlock/distributed_lock.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/uri.hpp"

namespace dlock {

namespace detail {
template <class Fn>
decltype(auto) call_with_lease(Fn&& fn, const lease& l) {
  if constexpr (std::is_invocable_v<Fn&&, const lease&>)
    return std::invoke(std::forward<Fn>(fn), l);
  else
    return std::invoke(std::forward<Fn>(fn));
}
}  // namespace detail

template <class Rep, class Period, class Fn>
decltype(auto) with_lock(distributed_lock& lock, std::chrono::duration<Rep, Period> timeout, Fn&& fn) {
  lease held = lock.try_acquire_for(timeout);
  if (!held)
    throw error(errc::timeout, "could not acquire lock '" + std::string(lock.name()) + "' within " +
                                   format_duration(std::chrono::ceil<std::chrono::milliseconds>(timeout)));
  using result = decltype(detail::call_with_lease(std::forward<Fn>(fn), held));
  if constexpr (std::is_void_v<result>) {
    detail::call_with_lease(std::forward<Fn>(fn), held);
    held.release();
  } else {
    result r = detail::call_with_lease(std::forward<Fn>(fn), held);
    held.release();
    return r;  // decltype(auto): the declared type of r, moved for values
  }
}

}  // namespace dlock
