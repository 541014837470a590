#pragma once
// A C library's handle owned by a std::unique_ptr and freed by the library's function for it:
//   using context_ptr = dlock::detail::c_handle<redisContext, redisFree>;
// one line per handle type instead of a deleter struct each.
#include <memory>

namespace dlock::detail {

template <auto Free>
struct free_with {
  template <class T>
  void operator()(T* handle) const noexcept {
    Free(handle);
  }
};

template <class T, auto Free>
using c_handle = std::unique_ptr<T, free_with<Free>>;

}  // namespace dlock::detail
