#pragma once
// The one clock every process of a comparison run stamps its history with.
//
// CLOCK_MONOTONIC is system-wide on Linux: every process reads the same counter (time since
// boot, never stepped by settimeofday or NTP), so instants taken in different client processes
// compare directly. It is read with the raw system call, not through libc's clock_gettime, on
// purpose: a client run under libfaketime (the clock-step scenarios) has libc's clock functions
// faked, and its history must still be stamped on the real clock the checker compares.
#include <chrono>
#include <cstdint>

namespace dlock::compare_spi {

struct shared_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<shared_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};

using instant = shared_clock::time_point;

// Sleeps until `t` on the shared clock (clock_nanosleep TIMER_ABSTIME, raw system call).
void sleep_until(instant t) noexcept;

}  // namespace dlock::compare_spi
