#pragma once
// The clock faults, with libfaketime (Debian's faketime package) preloaded into the workers.
// The history is stamped with the raw CLOCK_MONOTONIC system call (shared_clock), which
// libfaketime cannot fake: the checker's instants stay real whatever a client believes.
//   clock-step  every client runs under libfaketime with its wall clock only (FAKETIME_TIMESTAMP_FILE,
//               FAKETIME_NO_CACHE, FAKETIME_DONT_FAKE_MONOTONIC); a holder is caught inside its
//               write and every other client's wall clock steps 60 s ahead. A lock whose expiry is
//               the client's wall time (an unsafe GETSET takeover) lets them take it over; the others must
//               not care.
//   clock-slow  client 1's clocks, CLOCK_MONOTONIC too, run at a quarter of real speed (FAKETIME="+0 x0.25");
//               it starts 300 ms before the others, so it is the first holder: it believes its lease
//               valid (and renews it) four times later than the server expires it. Its write of half
//               a ttl of its own clock lasts two real ttls; the others, at real speed, wait for it.
#include <chrono>
#include <string>

#include "dlock_compare/scenario.hpp"

namespace dlock::compare {

inline constexpr double clock_slow_rate = 0.25;  // below 1/3: a renewal every ttl/3 comes after the ttl
inline constexpr std::chrono::seconds clock_step_by{60};

// The preloadable libfaketime (the thread-safe libfaketimeMT), or empty when not installed.
std::string libfaketime_path();
std::chrono::milliseconds clock_fault_run_length(fault f, const scenario_settings& s);
scenario_result run_clock_step(const scenario_settings& s);
scenario_result run_clock_slow(const scenario_settings& s);

}  // namespace dlock::compare
