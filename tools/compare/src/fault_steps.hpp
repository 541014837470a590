#pragma once
// Steps the partition and clock faults share (src/partition.cpp, src/clock_faults.cpp): the
// fleet's plan for a fault, catching a holder inside its write, waiting for the fleet, and the
// victim's section the fault struck.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dlock_compare/scenario.hpp"
#include "dlock_compare/section.hpp"
#include "dlock_compare/worker_fleet.hpp"

namespace dlock::compare::fault_steps {

// Every client writing `work`, for `run`, waiting up to 2 ttls + 1 s for each acquire.
fleet_plan plan(const scenario_settings& s, std::chrono::milliseconds work, std::chrono::milliseconds run);

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
// "lost notified 0.31s before the next grant" / "... after ..." / "never notified".
std::string notified_text(const section& victim, std::optional<instant> next_grant);
std::string release_text(const section& victim);  // "its release: not_owner" ...

}  // namespace dlock::compare::fault_steps
