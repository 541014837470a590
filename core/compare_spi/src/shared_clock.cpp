#include "dlock/compare_spi/shared_clock.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace dlock::compare_spi {

shared_clock::time_point shared_clock::now() noexcept {
  timespec ts{};
  // The system call, not libc's clock_gettime: see the header (libfaketime interposes libc).
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return time_point(duration(std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec));
}

void sleep_until(instant t) noexcept {
  const auto ns = t.time_since_epoch().count();
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  // The raw call returns -EINTR-style errors through errno; retry on a signal.
  while (::syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0 && errno == EINTR) {
  }
}

}  // namespace dlock::compare_spi
