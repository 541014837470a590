// dlock compare [--backends LIST] [--faults LIST] [--duration D] [--clients N] [--json FILE]
//               [--markdown FILE] [--html FILE] [--log FILE] [--speed-duration D] [--no-speed]
// The comparison matrix: for each backend (a scheme, its server taken from the
// launcher's variables, compose/native/dlock-servers) and each named fault, N client processes
// (threads of one process for a process-scope lock) contend for one lock and write to a recorded
// resource while the fault strikes the holder; the checker's observation and its verdict fill the
// cell (tools/compare's verdict.hpp). Every cell is an observation, never a declaration: a
// backend that cannot run says why in its row. Then each backend's speed, measured in the same
// run (compare_speed.cpp). The terminal gets a compact table, one short verdict per cell;
// --markdown, --html and --json the details. The workers' stderr goes to a log the report names,
// not between the progress lines.
//
// The workers are this program itself (`dlock compare-worker`, hidden), so an installed dlock
// needs no second executable.
#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): ::mkdtemp is POSIX, declared here, not in <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "compare_speed.hpp"
#include "dlock/dlock.hpp"
#include "dlock_compare/cell_setup.hpp"
#include "dlock_compare/families.hpp"
#include "dlock_compare/html_report.hpp"
#include "dlock_compare/report.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/worker_cli.hpp"

namespace dlock::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using compare::fault;
using std::chrono::milliseconds;

// Short, so that the fault scenarios (which wait out a ttl or pause for 2.5 of them) stay short.
constexpr milliseconds run_ttl = 1s;

constexpr const char* usage =
    "usage: dlock compare [--backends LIST] [--faults LIST] [--duration D] [--clients N]\n"
    "                     [--json FILE] [--markdown FILE] [--html FILE] [--log FILE]\n"
    "                     [--speed-duration D] [--no-speed]\n"
    "For each backend x fault: N client processes (default 3) contend for one lock and write to a\n"
    "recorded resource while the fault strikes the holder; a checker reads the history and judges\n"
    "the cell: safe, safe with fencing (overlaps, every stale write refused by the fenced resource),\n"
    "unavailable for D (no grant for D after the fault: the lock stayed with a paused or cut-off\n"
    "holder, no majority, or over 3 ttls), unsafe, or not run: why. Prints a compact table (one\n"
    "short verdict per cell, 160 columns) and its key; the observations, the verdicts' definitions\n"
    "and the checker's counts go to --markdown, --html, --json. Progress on stderr. Every lock is\n"
    "opened with ttl=1s. A process-scope lock (the scope `dlock backends` lists) runs its clients\n"
    "as threads of one process, in healthy only: every other fault strikes a client process.\n"
    "  --backends LIST  schemes `dlock backends` lists, comma-separated (default: every scheme\n"
    "                   built in, the unsafe ones too, opened with unsafe=true)\n"
    "  --faults LIST    healthy, holder-kill, holder-pause, pause-before-write, server-restart,\n"
    "                   connection-kill, server-pause, masters-minority-lost, master-restarted-empty,\n"
    "                   masters-majority-lost, ensemble-leader-lost, ensemble-majority-lost,\n"
    "                   partition, clock-step, clock-slow, kill-mid-acquire (default: all).\n"
    "                   Servers are stopped, started and paused through $DLOCK_SERVERS, the\n"
    "                   launcher; connection-kill ends the holder's connections on the\n"
    "                   server with its own command (below) and the URI's credentials (or,\n"
    "                   without one, expires its session by a loopback proxy silencing it);\n"
    "                   server-pause SIGSTOPs the server's processes for 2.5 ttls; the masters-*\n"
    "                   faults stop or restart empty independent masters, the ensemble-* faults\n"
    "                   an ensemble's members (on the variables below; the holder's session, or\n"
    "                   lease, is its backend's, longer than an election);\n"
    "                   partition: every client in a network namespace of its own (root, ip), the\n"
    "                   holder's veth link down for 2.5 ttls; clock-step: libfaketime steps the\n"
    "                   other clients' wall clocks 60s ahead while one holds; clock-slow: client\n"
    "                   1's clocks (monotonic too) at x0.25, it holds first (libfaketime, Debian\n"
    "                   faketime); kill-mid-acquire kills a client between the two commands of a\n"
    "                   two-command acquire, or at its grant. A fault that does not apply to a\n"
    "                   backend is 'not run: why'.\n"
    "  --duration D     how long the clients contend in the healthy run (default 2s); the fault\n"
    "                   runs last at least as long as the fault and its aftermath need\n"
    "  --json FILE      every cell with its verdict and the checker's whole result; each row's verdict\n"
    "  --markdown FILE  the table in Markdown: each row's verdict, each cell's verdict and observation,\n"
    "                   the legend\n"
    "  --html FILE      a self-contained page (inline CSS and SVG): the matrix as a coloured grid with\n"
    "                   each cell's details on hover, unsafe rows flagged, the run's settings, the\n"
    "                   ops/s bars and the latency distributions of each backend\n"
    "  --log FILE       where the workers' stderr goes (lease-lost notices, client libraries' logs),\n"
    "                   each line after its cell's name (default: a file dlock-compare-PID-workers.log\n"
    "                   in the temporary folder, made at the first line); the report names it\n"
    "Speed (after the matrix, same run, every backend row, unsafe ones flagged): acquire+release\n"
    "cycles/s by 1 and by 8 client threads (each with its own connection and name), and the handoff\n"
    "p50/p99 with 8 clients on one name (release to the next waiting client's grant); the CPUs the\n"
    "clients ran on are printed with it.\n"
    "  --speed-duration D  how long each of the 3 speed points of a backend runs (default 1s)\n"
    "  --no-speed       skip the speed phase\n"
    "Servers: from the variables compose/native/dlock-servers prints, listed below, the scheme\n"
    "replaced by the backend's; a scheme without a server runs on the URI its backend declares\n"
    "(in a temporary folder).\n"
    "A backend whose variable is unset is reported 'not run: VARIABLE unset'.\n"
    "Exit: 0 the run completed (unsafe rows showing overlaps are its observations), 64 usage,\n"
    "69 a backend's server is unreachable (checked before anything runs).";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t from = 0;
  for (;;) {
    const auto comma = text.find(',', from);
    items.push_back(text.substr(from, comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return items;
}

std::vector<std::string> backends_asked(const args& a) {
  const auto known = default_registry().list();
  std::vector<std::string> schemes;
  if (!a.get("backends")) {
    for (const auto& info : known) schemes.push_back(info.scheme);
    return schemes;
  }
  for (const auto& s : split_list(*a.get("backends"))) {
    if (!default_registry().contains(s)) {
      std::string names;
      for (const auto& info : known) names += (names.empty() ? "" : ", ") + info.scheme;
      throw usage_error("--backends: unknown scheme '" + redact_for_message(s) + "'; expected schemes from: " + names);
    }
    schemes.push_back(s);
  }
  return schemes;
}

std::vector<fault> faults_asked(const args& a) {
  if (!a.get("faults")) return compare::every_fault();
  std::vector<fault> faults;
  for (const auto& name : split_list(*a.get("faults"))) {
    const auto f = compare::fault_named(name);
    if (!f) {
      std::string known;
      for (const auto each : compare::every_fault())
        known += (known.empty() ? "" : ", ") + std::string(compare::to_string(each));
      throw usage_error("--faults: unknown fault '" + name + "'; expected one of: " + known);
    }
    faults.push_back(*f);
  }
  return faults;
}

// Opened (and emptied) before anything runs: a path that cannot be written is a usage error, not
// a report lost after minutes of running.
std::optional<std::ofstream> output_file(const args& a, const char* option) {
  const auto path = a.get(option);
  if (!path) return std::nullopt;
  std::ofstream out(*path, std::ios::trunc);
  if (!out) throw usage_error(std::string("--") + option + ": cannot write '" + *path + "'");
  return out;
}

// Every line the workers wrote on stderr, each after its cell's name, in one file the report
// names, so that none of them lands between the progress lines; dlock compare's own background
// errors (a lease of the speed phase lost) too. --log FILE is opened (and emptied) before anything
// runs; the default file is made at the first line.
class worker_log {
 public:
  explicit worker_log(const args& a) {
    if (const auto path = a.get("log")) {
      path_ = *path;
      out_.open(path_, std::ios::trunc);
      if (!out_) throw usage_error("--log: cannot write '" + path_ + "'");
    } else {
      path_ = (fs::temp_directory_path() / ("dlock-compare-" + std::to_string(::getpid()) + "-workers.log")).string();
    }
  }
  // The lines of a cell's workers (their stderr file), kept in the cell and appended here.
  void add_cell(compare::matrix_cell& cell, const fs::path& workers_stderr) {
    std::ifstream in(workers_stderr);
    for (std::string line; std::getline(in, line);) cell.worker_messages.push_back(line);
    const std::string head = "[" + cell.backend + " x " + std::string(compare::to_string(cell.scenario)) + "] ";
    for (const auto& line : cell.worker_messages) add(head + line);
  }
  void add(const std::string& line) noexcept {
    try {
      const std::lock_guard guard(mutex_);
      if (!out_.is_open()) out_.open(path_, std::ios::trunc);
      out_ << line << '\n' << std::flush;
      ++lines_;
    } catch (...) {
      // A log that cannot be written must not stop the run; the count says what reached it.
    }
  }
  // The report's view: the file, or none when nothing was written.
  void name_in(compare::matrix& m) {
    const std::lock_guard guard(mutex_);
    m.worker_log = lines_ > 0 ? path_ : std::string();
    m.worker_log_lines = lines_;
  }

 private:
  std::mutex mutex_;
  std::string path_;
  std::ofstream out_;
  std::uint64_t lines_ = 0;
};

// dlock compare's own background errors (report_background_error: a lease of the speed phase
// lost) go to the log too, while the run lasts.
class background_errors_to {
 public:
  explicit background_errors_to(worker_log& log)
      : previous_(set_background_error_handler([&log](std::error_code ec, std::string_view message) {
          log.add("[dlock compare] dlock: " + std::string(message) + " (" + ec.message() + ")");
        })) {}
  ~background_errors_to() { set_background_error_handler(std::move(previous_)); }
  background_errors_to(const background_errors_to&) = delete;
  background_errors_to& operator=(const background_errors_to&) = delete;

 private:
  background_error_handler previous_;
};

// The URI a scheme runs with in `f`, or why it cannot run (cell_setup.hpp: the tests use the same).
using backend_uri = compare::server_uri;

backend_uri uri_for(const backend_info& info, fault f, const fs::path& work_dir) {
  return compare::cell_uri(info, f, run_ttl, work_dir);
}

// One acquire and release, so that an unreachable server stops the run before anything ran (69)
// rather than filling its row with errors. A URI the backend refuses is that cell's "not run".
std::string probe(const std::string& uri, const std::string& scheme) {
  try {
    auto backend = dlock::open(uri);
    auto lock = backend->make_lock("dlock-compare/probe/" + std::to_string(::getpid()));
    auto lease = lock->try_acquire_for(5s);
    if (lease) lease.release();
    return {};
  } catch (const dlock::error& e) {
    if (e.code() == errc::invalid_uri || e.code() == errc::invalid_argument || e.code() == errc::not_supported)
      return scrub_secrets(e.detail());
    throw dlock::error(
        e.code(), scheme + " is unreachable: " + e.detail() + " (start its server: compose/native/dlock-servers up)");
  }
}

// A temporary folder for the histories and the file:// locks, removed at the end.
class temporary_folder {
 public:
  temporary_folder() {
    std::string pattern = (fs::temp_directory_path() / "dlock-compare-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a folder in " + fs::temp_directory_path().string());
    path_ = pattern;
  }
  ~temporary_folder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  temporary_folder(const temporary_folder&) = delete;
  temporary_folder& operator=(const temporary_folder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct planned_cell {
  const backend_info* info;
  fault scenario;
  backend_uri uri;
};

std::string redacted(const std::string& uri) {
  try {
    return dlock::uri::parse(uri).redacted();
  } catch (const std::exception&) {
    return redact_for_message(uri);
  }
}

// The speed row of a scheme: the healthy run's URI, unless the probe refused it.
speed_target speed_target_for(const backend_info& info, const fs::path& work_dir, const std::string& refused) {
  auto uri = uri_for(info, fault::healthy, work_dir);
  if (!refused.empty()) uri = {std::nullopt, refused};
  return {info.scheme, !info.unsafe_because.empty(), uri.uri, uri.not_run_because};
}

// The settings the HTML report shows: the command as typed (secrets scrubbed), when, on how many CPUs.
compare::run_context run_context_now(const arguments& argv) {
  compare::run_context c;
  c.command_line = "dlock compare";
  for (const auto& word : argv) c.command_line += " " + scrub_secrets(word);
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char date[40];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &utc);
  c.date_utc = date;
  c.host_cpus = static_cast<unsigned>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  return c;
}

// What the command line asked for, checked.
struct compare_request {
  std::vector<std::string> schemes;
  std::vector<fault> faults;
  milliseconds duration{};
  std::uint32_t clients = 0;
  std::optional<std::ofstream> json, markdown, html;
  milliseconds speed_duration{};
  bool measure_speed = true;
};

compare_request parse_request(const args& a) {
  if (!a.positional().empty())
    throw usage_error("takes no operands; got '" + redact_for_message(a.positional().front()) + "'");
  compare_request r;
  r.schemes = backends_asked(a);
  r.faults = faults_asked(a);
  r.duration = a.duration("duration").value_or(2s);
  if (r.duration <= milliseconds::zero()) throw usage_error("--duration must be positive");
  r.clients = static_cast<std::uint32_t>(a.integer("clients", 3, 2, 64));
  r.json = output_file(a, "json");
  r.markdown = output_file(a, "markdown");
  r.html = output_file(a, "html");
  r.speed_duration = a.duration("speed-duration").value_or(1s);
  if (r.speed_duration <= milliseconds::zero()) throw usage_error("--speed-duration must be positive");
  r.measure_speed = !a.flag("no-speed");
  return r;
}

// Every cell planned and every server probed before anything runs, so that an unreachable server
// stops the run at once.
struct run_plan {
  std::vector<planned_cell> cells;
  std::vector<speed_target> speed_targets;
};

run_plan plan_run(const compare_request& r, const std::vector<backend_info>& infos, const fs::path& work_dir) {
  run_plan plan;
  for (const auto& scheme : r.schemes) {
    const auto& info = *std::ranges::find(infos, scheme, &backend_info::scheme);
    std::string refused;
    for (const auto f : r.faults) {
      auto uri = uri_for(info, f, work_dir);
      if (uri.uri && refused.empty()) refused = probe(*uri.uri, scheme);
      if (!refused.empty()) uri = {std::nullopt, refused};
      plan.cells.push_back({&info, f, std::move(uri)});
    }
    if (r.measure_speed) plan.speed_targets.push_back(speed_target_for(info, work_dir, refused));
  }
  return plan;
}

// The progress lines on stderr: step k of n and an estimate of the time left.
class progress {
 public:
  progress(const run_plan& plan, const compare::scenario_settings& settings, milliseconds speed_duration)
      : steps_(plan.cells.size() + plan.speed_targets.size()) {
    for (const auto& p : plan.cells)
      if (p.uri.uri) left_ += compare::run_length(p.scenario, settings) + 1s;
    for (const auto& t : plan.speed_targets)
      if (t.uri) left_ += compare::backend_speed_length(speed_duration);
  }
  void starting(std::string_view what, std::string_view scheme) {
    std::fprintf(stderr, "dlock compare: [%zu/%zu] %.*s on %.*s (about %llds left)\n", ++step_, steps_,
                 static_cast<int>(what.size()), what.data(), static_cast<int>(scheme.size()), scheme.data(),
                 static_cast<long long>(std::chrono::ceil<std::chrono::seconds>(left_).count()));
  }
  void skipped() { ++step_; }
  void done(milliseconds length) { left_ -= std::min(left_, length); }

 private:
  std::size_t step_ = 0;
  std::size_t steps_;
  milliseconds left_{};
};

// Runs the planned cells one after the other, each in its own folder under `work_dir`.
std::vector<compare::matrix_cell> run_cells(const run_plan& plan, compare::scenario_settings& settings,
                                            const fs::path& work_dir, progress& shown, worker_log& log) {
  std::vector<compare::matrix_cell> cells;
  std::size_t index = 0;
  for (const auto& p : plan.cells) {
    ++index;
    compare::matrix_cell cell;
    cell.backend = p.info->scheme;
    cell.scenario = p.scenario;
    if (!p.uri.uri) {
      shown.skipped();
      cell.text = "not run: " + p.uri.not_run_because;
      cells.push_back(std::move(cell));
      continue;
    }
    shown.starting(compare::to_string(p.scenario), p.info->scheme);
    settings.uri = *p.uri.uri;
    compare::prepare_settings(settings, *p.info, p.scenario);
    settings.name = "dlock-compare/" + std::to_string(::getpid()) + "/cell-" + std::to_string(index);
    settings.work_dir = work_dir / ("cell-" + std::to_string(index));
    fs::create_directories(settings.work_dir);
    settings.worker_log = settings.work_dir / "workers.stderr";
    cell.uri = redacted(settings.uri);
    try {
      cell.result = compare::run_scenario(p.scenario, settings);
    } catch (const std::exception& e) {
      // One cell that could not run (its workers wrote no history, a tool failed) is reported as
      // not run, with why, instead of ending the whole matrix.
      cell.result = compare::scenario_result{};
      cell.result->fault_not_injected = std::string("the cell failed: ") + e.what() + " (see the workers' log)";
    }
    cell.text = compare::observation(p.scenario, *cell.result);
    log.add_cell(cell, settings.worker_log);
    shown.done(compare::run_length(p.scenario, settings) + 1s);
    cells.push_back(std::move(cell));
  }
  return cells;
}

}  // namespace

int cmd_compare(const arguments& argv) {
  const args a(argv, {"backends", "faults", "duration", "clients", "json", "markdown", "html", "log", "speed-duration"},
               {"help", "no-speed"});
  if (a.flag("help")) {
    std::puts(usage);
    // Each backend declares its own (backends/<name>/compare/families.cpp).
    std::puts("Server variables of the built backends:");
    for (const auto* family : compare::families()) {
      if (family->variable == nullptr) continue;
      const std::string prefix(family->prefix), suffix(family->suffix);
      std::printf("  %-30s schemes %s\n", family->variable,
                  (suffix.empty() ? prefix + " and " + prefix + "+*" : prefix + "+* ending in " + suffix).c_str());
      if (family->quorum != compare::quorum_kind::none && family->quorum_variable != nullptr)
        std::printf("  %-30s %s faults: on %s\n", "",
                    family->quorum == compare::quorum_kind::ensemble ? "ensemble-*" : "masters-*",
                    family->quorum_variable);
      if (!family->kill_described.empty())
        std::printf("  %-30s connection-kill: %s\n", "", std::string(family->kill_described).c_str());
    }
    return 0;
  }
  auto request = parse_request(a);
  const auto context = run_context_now(argv);
  worker_log log(a);
  const background_errors_to own_errors(log);

  temporary_folder work;
  compare::scenario_settings settings;
  settings.worker_executable = self_executable();
  settings.worker_subcommand = {"compare-worker"};
  settings.clients = request.clients;
  settings.duration = request.duration;
  settings.ttl = run_ttl;

  const auto infos = default_registry().list();
  const auto plan = plan_run(request, infos, work.path());
  progress shown(plan, settings, request.speed_duration);

  compare::matrix m;
  m.backends = request.schemes;
  m.faults = request.faults;
  m.ttl = run_ttl;
  m.duration = request.duration;
  m.clients = request.clients;
  for (const auto& info : infos)
    if (!info.unsafe_because.empty() && std::ranges::find(request.schemes, info.scheme) != request.schemes.end())
      m.unsafe_backends.push_back(info.scheme);
  m.cells = run_cells(plan, settings, work.path(), shown, log);
  m.speed = measure_speeds(plan.speed_targets, request.speed_duration,
                           "dlock-compare/" + std::to_string(::getpid()) + "/speed/", [&](const speed_target& t) {
                             shown.starting("speed", t.backend);
                             shown.done(compare::backend_speed_length(request.speed_duration));
                           });
  log.name_in(m);
  if (!m.worker_log.empty())
    std::fprintf(stderr, "dlock compare: the workers' stderr (%llu lines): %s\n",
                 static_cast<unsigned long long>(m.worker_log_lines), m.worker_log.c_str());

  std::fputs(compare::to_text(m).c_str(), stdout);
  if (request.json) *request.json << compare::to_json(m);
  if (request.markdown) *request.markdown << compare::to_markdown(m);
  if (request.html) *request.html << compare::to_html(m, context);
  return 0;
}
int cmd_compare_worker(const arguments& argv) { return compare::worker_main(argv); }

}  // namespace dlock::cli
