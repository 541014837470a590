#pragma once
// The one rule for the throwing form of an entry point that has a noexcept form reporting through
// a std::error_code: it calls that form and throws what it reported (throw_if: a dlock::error with
// its code and the thread's last error message), or returns its result.
#include <system_error>
#include <type_traits>
#include <utility>

#include "dlock/error.hpp"

namespace dlock::detail {

// `call(ec)`'s result, or a dlock::error when it set ec.
template <class Call>
auto or_throw(Call&& call) -> std::invoke_result_t<Call, std::error_code&> {
  std::error_code ec;
  if constexpr (std::is_void_v<std::invoke_result_t<Call, std::error_code&>>) {
    std::forward<Call>(call)(ec);
    throw_if(ec);
  } else {
    auto result = std::forward<Call>(call)(ec);
    throw_if(ec);
    return result;
  }
}

}  // namespace dlock::detail
