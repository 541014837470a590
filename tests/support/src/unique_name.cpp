#include <array>
#include <random>

#include "dlock_test/support.hpp"

namespace dlock::testing {

std::string unique_name(std::string_view prefix) {
  // random_device is getrandom() on Linux: two processes started in the same microsecond still
  // draw different names, which a time- or pid-based name would not guarantee across hosts.
  thread_local std::random_device device;
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(prefix);
  out += '-';
  for (int i = 0; i < 3; ++i) {
    auto word = (static_cast<std::uint64_t>(device()) << 32) | device();
    for (int j = 0; j < 8; ++j, word >>= 4) out += hex[word & 0xf];
  }
  return out;
}

}  // namespace dlock::testing
