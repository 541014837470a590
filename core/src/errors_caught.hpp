#pragma once
// The one rule for what a call into code that may throw (a backend's factory, its constructor)
// becomes in a noexcept entry point of the core: a dlock::error keeps its code and detail, any
// other exception is a backend_error with its what().
#include <exception>
#include <system_error>
#include <utility>

#include "dlock/error.hpp"

namespace dlock::detail {

// `call()`'s result; on an exception, ec set by the rule above and an empty result.
template <class Call>
auto errors_caught(std::error_code& ec, Call&& call) noexcept -> decltype(call()) {
  try {
    return std::forward<Call>(call)();
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
  return {};
}

}  // namespace dlock::detail
