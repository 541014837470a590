#pragma once
// What every dlock fuzzer shares: a property check that aborts (so libFuzzer saves the input as a
// crash and CI fails), and the two names a pairwise property (injectivity) compares.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace dlock::fuzz {

// The bytes of `s` printable on one line: non-printable bytes as \xHH.
inline std::string escaped(std::string_view s) {
  std::string out;
  for (const unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// A property that failed: says which, with the values involved, and aborts.
[[noreturn]] inline void fail(std::string_view property, std::string_view a = {}, std::string_view b = {}) {
  std::fprintf(stderr, "property violated: %.*s\n  a = '%s'\n  b = '%s'\n", static_cast<int>(property.size()),
               property.data(), escaped(a).c_str(), escaped(b).c_str());
  std::abort();
}

inline void check(bool holds, std::string_view property, std::string_view a = {}, std::string_view b = {}) {
  if (!holds) fail(property, a, b);
}

// Two strings from one input: a random-length first one, the rest as the second. Lets a
// fuzzer compare the mapping of two names it chose (distinct names -> distinct keys).
inline std::pair<std::string, std::string> two_strings(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  std::string first = in.ConsumeRandomLengthString();
  std::string second = in.ConsumeRemainingBytesAsString();
  return {std::move(first), std::move(second)};
}

}  // namespace dlock::fuzz
