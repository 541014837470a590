#pragma once
// The acquire entry points of the lock objects are noexcept: a dlock::error thrown on the way
// (a session that cannot be had, say) keeps its code, and anything else the client library or the
// standard library throws is a backend_error. One place for that rule, shared by the mutex, the
// reader-writer lock and the semaphore.
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"

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

}  // namespace dlock::zookeeper
