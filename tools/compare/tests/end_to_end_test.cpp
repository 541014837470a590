// Real worker processes (a worker_fleet) contending for one name, then the checker on their
// history, on the backends that need no server (the registry's schemes of process and host scope,
// at the local URI their folders declare). A process-scope lock excludes only within a process,
// so separate processes MUST overlap: the proof that the checker sees overlaps when they happen.
// A host-scope lock must show none; and a holder killed mid-run leaves a history the checker still
// reads. (On a server, the scenario tests and each backend's own `dlock compare` tests check the
// same: compare/scenario/..., cli/compare_<name>.)
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/uri.hpp"
#include "dlock_compare/checker.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/worker_fleet.hpp"
#include "dlock_test/support.hpp"
#include "local_backends.hpp"
#include "temp_dir.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Short enough to keep each test near 2 s, long enough for dozens of handoffs.
fleet_plan plan_for(const std::string& uri, const temp_dir& dir, std::vector<milliseconds> work = {10ms, 10ms, 10ms}) {
  fleet_plan plan;
  plan.worker_executable = DLOCK_COMPARE_WORKER;
  plan.uri = uri;
  plan.name = dlock::testing::unique_name("compare");
  plan.history = dir.path() / "history";
  plan.work = std::move(work);
  plan.duration = 1500ms;
  plan.acquire_timeout = 1000ms;
  return plan;
}

// Generous: the last acquire may start just before the end and wait its whole timeout.
instant generous_deadline(const worker_fleet& fleet, const fleet_plan& plan) {
  return fleet.stop_at() + plan.acquire_timeout + 20s;
}

check_result check_and_print(const fleet_plan& plan) {
  const auto events = read_history(plan.history);
  auto result = check(std::span<const event>(events));
  std::cout << "check: " << to_json(result, 3) << '\n';
  return result;
}

// Starts the workers, waits for them to finish cleanly, and checks the history.
check_result run_and_check(const fleet_plan& plan) {
  worker_fleet fleet(plan);
  const auto codes = fleet.wait(generous_deadline(fleet, plan));
  for (std::size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], std::optional<int>(0)) << "client " << i + 1;
  return check_and_print(plan);
}

// The URIs of the schemes without a server, by scope, in the test's folder.
std::string process_scope_uri(const temp_dir& dir) { return local_uri_of_scope(lock_scope::process, dir.path()); }
std::string host_scope_uri(const temp_dir& dir) {
  return with_parameters(local_uri_of_scope(lock_scope::host, dir.path() / "locks"), "poll=1ms..20ms");
}

TEST(CompareEndToEnd, ProcessScopedLocksOverlapAcrossProcessesAndTheCheckerSeesIt) {
  temp_dir dir;
  // Each process counts its own tokens, and the client with the shortest work counts fastest:
  // the slower clients' writes carry smaller tokens than ones already written.
  const auto r = run_and_check(plan_for(process_scope_uri(dir), dir, {5ms, 15ms, 30ms}));
  EXPECT_EQ(r.totals.clients, 3u);
  EXPECT_GT(r.overlap_count(), 0u) << "three processes each holding their own process-scope lock must overlap";
  EXPECT_EQ(r.unnotified_losses, r.overlap_count())
      << "a process-scope lock never tells a holder another process got in";
  EXPECT_GT(r.stale_writes_accepted_by_naive, 0u);
  // The fence judges in the order of the write_begin instants, as the checker does: it refuses
  // exactly the stale writes, and nothing else.
  EXPECT_EQ(r.stale_writes_refused_by_fenced, r.stale_writes_accepted_by_naive);
  EXPECT_EQ(r.writes_refused_by_fenced, r.stale_writes_accepted_by_naive);
  EXPECT_EQ(r.totals.release_not_owner, 0u);
}

// What `dlock compare` does with a process-scope lock: its clients are threads of one worker
// process (each with its own backend object), where its exclusion holds. The same three clients
// that overlap as processes above must not overlap as threads.
TEST(CompareEndToEnd, ProcessScopedLocksRunAsThreadsOfOneProcessNeverOverlap) {
  temp_dir dir;
  auto plan = plan_for(process_scope_uri(dir), dir);
  plan.clients_in_one_process = true;
  worker_fleet fleet(plan);
  EXPECT_EQ(fleet.size(), 3u) << "three clients";
  EXPECT_EQ(fleet.pid(1), fleet.pid(3)) << "one process for every client";
  const auto codes = fleet.wait(generous_deadline(fleet, plan));
  ASSERT_EQ(codes.size(), 1u) << "one exit code: one process";
  EXPECT_EQ(codes[0], std::optional<int>(0));
  const auto r = check_and_print(plan);
  EXPECT_EQ(r.totals.clients, 3u) << "every thread recorded its own client id";
  EXPECT_GT(r.totals.grants, 30u) << "the three threads contended for 1.5 s";
  EXPECT_EQ(r.overlap_count(), 0u) << "a process-scope lock excludes the threads of its process";
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 0u) << "one process, one token counter";
  EXPECT_EQ(r.totals.acquire_errors + r.totals.release_errors, 0u);
}

// The workers' stderr goes to the plan's log, appended: not to the caller's stderr, where
// `dlock compare` prints its progress.
TEST(CompareEndToEnd, TheWorkersStderrGoesToTheWorkerLog) {
  temp_dir dir;
  auto plan = plan_for("nosuch-scheme://host", dir, {10ms, 10ms});
  plan.duration = 200ms;
  plan.worker_log = dir.path() / "workers.stderr";
  {
    std::ofstream earlier(plan.worker_log);
    earlier << "an earlier line\n";
  }
  worker_fleet fleet(plan);
  const auto codes = fleet.wait(generous_deadline(fleet, plan));
  for (const auto& code : codes) EXPECT_NE(code, std::optional<int>(0)) << "an unknown scheme is an error";
  std::ifstream in(plan.worker_log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 3u) << "the earlier line and one error per worker";
  EXPECT_EQ(lines.front(), "an earlier line") << "appended, not truncated";
  EXPECT_EQ(
      std::ranges::count_if(lines, [](const std::string& l) { return l.find("nosuch-scheme") != std::string::npos; }),
      2)
      << "each worker's error, naming the scheme";
}

// The properties of a lock that excludes every client of the run.
void expect_exclusive(const check_result& r) {
  EXPECT_EQ(r.totals.clients, 3u);
  EXPECT_GE(r.totals.grants, 3u) << "too few grants to say anything";
  EXPECT_EQ(r.totals.writes, r.totals.grants);
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.unnotified_losses, 0u);
  EXPECT_EQ(r.totals.release_not_owner, 0u);
  EXPECT_EQ(r.totals.release_errors, 0u);
  EXPECT_EQ(r.totals.acquire_errors, 0u);
  EXPECT_EQ(r.stale_writes_accepted_by_naive, 0u);
  EXPECT_EQ(r.writes_refused_by_fenced, 0u);
  EXPECT_EQ(r.totals.writes_begun_not_held, 0u);
  EXPECT_EQ(r.totals.writes_ended_not_held, 0u);
}

TEST(CompareEndToEnd, HostScopedLocksNeverOverlap) {
  temp_dir dir;
  const auto uri = host_scope_uri(dir);
  const auto r = run_and_check(plan_for(uri, dir));
  expect_exclusive(r);
  const auto info = default_registry().find(dlock::uri::parse(uri).scheme());
  ASSERT_TRUE(info.has_value());
  if (info->caps.has(capability::fencing)) {
    EXPECT_EQ(r.totals.writes_without_token, 0u) << uri << " declares fencing";
  }
}

// A URI may carry a password: the fleet hands it to its workers in their environment, never on
// their command line, which every user of the machine can read in `ps`.
TEST(CompareEndToEnd, WorkersGetTheUriInTheirEnvironmentNotOnTheirCommandLine) {
  temp_dir dir;
  const std::string uri = with_parameters(host_scope_uri(dir), "ttl=4321ms");
  auto plan = plan_for(uri, dir, {10ms});
  plan.start_delay = 2s;  // the worker waits for the shared start: time to read its /proc entries
  worker_fleet fleet(plan);
  const auto read_nul_separated = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(text.begin(), text.end(), '\0', '\n');
    return text;
  };
  const auto proc = "/proc/" + std::to_string(fleet.pid(1));
  // Right after the spawn the kernel may show an empty command line for a moment: read again.
  auto command_line = read_nul_separated(proc + "/cmdline");
  for (int i = 0; i < 100 && command_line.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    command_line = read_nul_separated(proc + "/cmdline");
  }
  EXPECT_NE(command_line.find("--history"), std::string::npos) << "not the worker's command line: " << command_line;
  EXPECT_EQ(command_line.find("4321ms"), std::string::npos) << "the URI is on the command line: " << command_line;
  EXPECT_NE(read_nul_separated(proc + "/environ").find("DLOCK_URI=" + uri + "\n"), std::string::npos)
      << "the worker's environment has no DLOCK_URI with the URI";
  const auto codes = fleet.wait(generous_deadline(fleet, plan));
  EXPECT_EQ(codes.at(0), std::optional<int>(0)) << "the worker did not open the URI it was given";
}

// Stops `pid` and waits until the kernel reports it stopped (state T), so that no event of it
// is still on its way into the history. Bounded: false if it did not stop within 5 s.
bool stop_and_wait(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  for (int i = 0; i < 500; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, command, state;
    stat >> pid_field >> command >> state;  // the worker's name has no spaces
    if (state == "T") return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The client's latest section, as the history has it now.
std::optional<section> latest_section_of(std::uint32_t client, const std::filesystem::path& history) {
  std::optional<section> latest;
  for (auto& s : assemble_sections(read_history(history)))
    if (s.client == client) latest = s;  // ordered by attempt
  return latest;
}

// Finds the holder in the growing history and leaves it stopped (SIGSTOP) where the history shows
// it inside its write; resumes and tries again when it was caught between steps. Bounded.
std::optional<std::uint32_t> freeze_a_holder_inside_its_write(const worker_fleet& fleet, const fleet_plan& plan) {
  for (int i = 0; i < 200; ++i) {  // each try pauses 10 ms or less
    std::this_thread::sleep_for(10ms);
    const auto holders = holders_at_end(read_history(plan.history));
    if (holders.size() != 1) continue;
    if (!stop_and_wait(fleet.pid(holders.front()))) return std::nullopt;
    const auto s = latest_section_of(holders.front(), plan.history);
    if (s && s->write_begin && !s->write_end) return holders.front();
    ::kill(fleet.pid(holders.front()), SIGCONT);  // caught between steps: try again
  }
  return std::nullopt;
}

// The scenario runner's path: find the holder in the growing history, freeze it where the
// history shows it inside its write, SIGKILL it there, and let the others go on.
TEST(CompareEndToEnd, AHolderKilledInsideItsWriteLeavesAHistoryTheCheckerReads) {
  temp_dir dir;
  auto plan = plan_for(host_scope_uri(dir), dir, {100ms, 100ms, 100ms});
  worker_fleet fleet(plan);  // its destructor kills and reaps every worker, stopped or not
  sleep_until(fleet.start_at());
  const auto victim = freeze_a_holder_inside_its_write(fleet, plan);
  ASSERT_TRUE(victim.has_value()) << "no holder was ever caught inside its write";
  const auto killed_at = shared_clock::now();
  ASSERT_EQ(::kill(fleet.pid(*victim), SIGKILL), 0);
  const auto codes = fleet.wait(generous_deadline(fleet, plan));
  for (std::uint32_t client = 1; client <= codes.size(); ++client)
    EXPECT_EQ(codes[client - 1], std::optional<int>(client == *victim ? 128 + SIGKILL : 0)) << "client " << client;

  const auto events = read_history(plan.history);
  const auto r = check(std::span<const event>(events));
  std::cout << "check: " << to_json(r, 3) << '\n';
  EXPECT_EQ(r.overlap_count(), 0u);
  EXPECT_EQ(r.totals.writes_unfinished, 1u) << "the killed holder's write never ended";
  // A host-scope lock dies with its holder's process: the others go on holding after the kill.
  const auto sections = assemble_sections(events);
  EXPECT_TRUE(std::ranges::any_of(sections, [&](const section& s) {
    return s.client != *victim && s.granted && *s.granted > killed_at;
  })) << "no other client was granted the lock after the holder died";
  const auto recovery = time_to_recover(sections, killed_at);
  ASSERT_TRUE(recovery.has_value());
  std::cout << "recovered " << std::chrono::duration<double, std::milli>(*recovery).count() << " ms after the kill\n";
}

}  // namespace
}  // namespace dlock::compare::testing
