#pragma once
// kill-mid-acquire: a client SIGKILLed inside its acquire, once the server holds its lock. The
// well-known "SETNX then EXPIRE" and "INCR then EXPIRE" locks die here: the first command made the
// key, the second (its expiry) never comes, and nobody is ever granted the lock again. A scheme
// whose acquire is one command has no such place: its client is killed right after the grant,
// and the lock must free itself within its ttl.
//
// How the place is hit: clients 2..N are held back (SIGSTOP) when the run starts, so client 1 is
// alone to take the lock. Where the acquire is two commands, only client 1 is opened with
// unsafe_pause_between (a test hook of those schemes: a sleep between the two commands), longer
// than the run: inside its acquire for 300 ms without a grant, it is between its commands. Where it
// is one command, its grant is the place. The others are resumed, wait for the lock, and client 1
// is SIGKILLed there. Every client polls at least every 50 ms, so a lock that frees itself is
// taken at once.
#include <chrono>
#include <string>

#include "dlock/registry.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/worker_fleet.hpp"

namespace dlock::compare {

// The scheme's acquire is two commands and it takes the unsafe_pause_between hook.
bool acquire_has_two_commands(const backend_info& info);

// The plan's URIs for this fault: fast polling for every client; client 1 with the pause.
void prepare_kill_mid_acquire(fleet_plan& plan, const scenario_settings& s);
std::chrono::milliseconds kill_mid_acquire_run_length(const scenario_settings& s);

// Finds client 1 at its place, kills it, waits for the fleet; fills victim, victim_caught,
// recovered_after (the kill to the next grant), watched_after_fault, worker_exit_codes, or
// fault_not_injected.
void run_kill_mid_acquire(worker_fleet& fleet, const fleet_plan& plan, const scenario_settings& s, scenario_result& r);

// The cell's words: "killed between its acquire's two commands: never granted again (4.1s watched)",
// "killed at its grant: recovered in 1.02s".
std::string kill_mid_acquire_observation(const scenario_result& r);

}  // namespace dlock::compare
