// Fuzzes dlock::parse_duration (ttl=, renew=, poll=, waits given as text) and format_duration.
// Properties: it accepts or throws dlock::error; an accepted duration is between 0 and
// longest_duration; format_duration of it parses back to the same value (the shortest form loses
// nothing); and a number with a unit ("<n>ms") is read exactly.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "dlock_fuzz/check.hpp"

using dlock::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::chrono::milliseconds d{};
  try {
    d = dlock::parse_duration(text);
  } catch (const dlock::error&) {
    return 0;
  }
  check(d.count() >= 0, "a parsed duration is not negative", text);
  check(d <= dlock::longest_duration, "a parsed duration is at most longest_duration", text);
  const std::string shown = dlock::format_duration(d);
  std::chrono::milliseconds again{};
  try {
    again = dlock::parse_duration(shown);
  } catch (const dlock::error&) {
    dlock::fuzz::fail("format_duration's text parses", text, shown);
  }
  check(again == d, "parse_duration(format_duration(d)) == d", text, shown);
  const std::string in_ms = std::to_string(d.count()) + "ms";
  check(dlock::parse_duration(in_ms) == d, "'<n>ms' reads n milliseconds", text, in_ms);
  return 0;
}
