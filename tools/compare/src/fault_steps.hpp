#pragma once
// Steps the scenarios share (scenario.cpp, partition_fault.cpp, clock_faults.cpp, quorum.cpp,
// kill_mid_acquire.cpp): the fleet's plan for a fault, catching a holder inside its write, waiting
// for the fleet, the victim's section the fault struck, and the cells' wording of durations.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dlock_compare/scenario.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_compare/worker_fleet.hpp"

namespace dlock::compare::fault_steps {

// Every client writing `work`, for `run`, waiting up to 2 ttls + 1 s for each acquire: a timeout is
// only a retry, but a waiter that gives up too early would hide the recovery it waits for.
fleet_plan plan(const scenario_settings& s, std::chrono::milliseconds work, std::chrono::milliseconds run);

// Waits until the kernel reports `pid` stopped (state T), polling every 10 ms until `deadline`.
bool wait_stopped(pid_t pid, instant deadline);

// How long to wait for the fleet: generously, as the last acquire may start just before the end
// and wait its whole timeout.
instant wait_deadline(const worker_fleet& fleet, const fleet_plan& plan);

// Finds a holder in the growing history and leaves it stopped (SIGSTOP) where the history shows
// it inside its write (resumed and tried again when caught between steps). Bounded by the run.
std::optional<std::uint32_t> stop_a_holder_inside_its_write(const worker_fleet& fleet, const fleet_plan& plan);

// Waits for the fleet (generously past its end), then reads and checks the history.
void finish(worker_fleet& fleet, const fleet_plan& plan, scenario_result& r);

// The section of `client` that was under way at `at` (granted before it), if any.
std::optional<section> section_at(const std::vector<section>& sections, std::uint32_t client, instant at);
// The first grant after `at` to a client other than `client`.
std::optional<instant> next_grant_to_another(const std::vector<section>& sections, std::uint32_t client, instant at);

std::string seconds(shared_clock::duration d);  // "1.23s"
// What every cell says first: "fault not injected: why", "overlaps N (unnotified M)", "stale
// writes: accepted N / refused M", each only where it applies.
std::vector<std::string> checker_observations(const scenario_result& r);
// "lost notified 0.31s before the next grant" / "... after ..." / "never notified".
std::string notified_text(const section& victim, std::optional<instant> next_grant);
std::string release_text(const section& victim);  // "its release: not_owner" ...

}  // namespace dlock::compare::fault_steps
