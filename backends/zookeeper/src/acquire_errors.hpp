#pragma once
// How an acquire of the mutex, the reader-writer lock or the semaphore ends other than by a grant
// or a refusal: one place for each rule, shared by the three.
// - The acquire entry points of the lock objects are noexcept: a dlock::error thrown on the way (a
//   session that cannot be had, say) keeps its code, and anything else the client library or the
//   standard library throws is a backend_error.
// - A wait for a node to change ends early on a stop request or an expired session.
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock/spi.hpp"
#include "session.hpp"

namespace dlock::zookeeper {

// Runs `attempt` (which returns the lease, or nullptr with ec set) and turns an exception into ec.
template <class Attempt>
std::unique_ptr<spi::lease_state> acquire_or_error(std::error_code& ec, Attempt&& attempt) noexcept {
  try {
    return std::forward<Attempt>(attempt)();
  } catch (const dlock::error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, std::string("zookeeper: ") + e.what());
  }
  return nullptr;
}

// After a wait for a node to change: true when the acquire ends here. A stop request leaves as the
// deadline does, our nodes withdrawn by `give_up` and no error; an expired session took them with
// it, and the acquire fails as backend_unavailable. `what` names the acquire ("write acquire of 'x'").
template <class GiveUp>
bool wait_ended(const session& s, GiveUp&& give_up, const std::string& what, std::error_code& ec) {
  if (spi::stop_requested()) {
    std::forward<GiveUp>(give_up)();
    return true;
  }
  if (s.expired()) {
    set_error(ec, errc::backend_unavailable, "zookeeper: the session expired during the " + what);
    return true;
  }
  return false;
}

}  // namespace dlock::zookeeper
