// dlock compare [--backends LIST] [--faults LIST] [--duration D] [--clients N] [--json FILE]
//               [--markdown FILE]
// The comparison matrix (issue 10): for each backend (a scheme, its server taken from the
// launcher's variables, compose/native/dlock-servers) and each named fault, N client processes
// contend for one lock and write to a recorded resource while the fault strikes the holder;
// the checker's observation fills the cell. Every cell is an observation, never a declaration:
// a backend that cannot run says why in its row.
//
// The workers are this program itself (`dlock compare-worker`, hidden), so an installed dlock
// needs no second executable.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"
#include "dlock_compare/report.hpp"
#include "dlock_compare/kill_mid_acquire.hpp"
#include "dlock_compare/scenario.hpp"
#include "dlock_compare/servers.hpp"
#include "dlock_compare/worker_cli.hpp"

namespace dlock::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using compare::fault;
using compare::launcher_process;

// Short, so that the fault scenarios (which wait out a ttl or pause for 2.5 of them) stay short.
constexpr milliseconds run_ttl = 1s;

constexpr const char* usage =
    "usage: dlock compare [--backends LIST] [--faults LIST] [--duration D] [--clients N]\n"
    "                     [--json FILE] [--markdown FILE]\n"
    "For each backend x fault: N client processes (default 3) contend for one lock and write to a\n"
    "recorded resource while the fault strikes the holder; a checker reads the history. Prints the\n"
    "table backend x fault and a legend; progress on stderr. Every lock is opened with ttl=1s.\n"
    "  --backends LIST  schemes, comma-separated (default: every scheme built in, the unsafe ones\n"
    "                   too, opened with unsafe=true): e.g. redis,file,redis+unsafe-del\n"
    "  --faults LIST    healthy, holder-kill, holder-pause, pause-before-write, server-restart,\n"
    "                   kill-mid-acquire (default: all; server-restart stops and starts the server\n"
    "                   through $DLOCK_SERVERS, the launcher; kill-mid-acquire kills a client between\n"
    "                   the two commands of a two-command acquire, or at its grant)\n"
    "  --duration D     how long the clients contend in the healthy run (default 2s); the fault\n"
    "                   runs last at least as long as the fault and its aftermath need\n"
    "  --json FILE      every cell with the checker's whole result\n"
    "  --markdown FILE  the table in Markdown\n"
    "Servers: from the variables compose/native/dlock-servers prints (DLOCK_REDIS_URI,\n"
    "DLOCK_REDLOCK_URI, DLOCK_MEMCACHED_URI, DLOCK_POSTGRES_URI, DLOCK_MYSQL_URI, DLOCK_ZOOKEEPER_URI;\n"
    "the scheme replaced by the backend's); memory:// and file:// (a temporary folder) need none.\n"
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
    if (!f) throw usage_error("--faults: unknown fault '" + name + "'; expected healthy, holder-kill, holder-pause, pause-before-write, server-restart or kill-mid-acquire");
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

std::string with_parameter(std::string uri, const std::string& parameter) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + parameter;
}

// The URI a scheme runs with in `f`, or why it cannot run.
struct backend_uri {
  std::optional<std::string> uri;
  std::string not_run_because;
};

backend_uri uri_for(const backend_info& info, fault f, const fs::path& work_dir) {
  if (f == fault::server_restart) {
    if (launcher_process(info.scheme) == nullptr) return {std::nullopt, "no single server to restart"};
    const char* launcher = std::getenv("DLOCK_SERVERS");
    if (launcher == nullptr || *launcher == '\0') return {std::nullopt, "DLOCK_SERVERS unset"};
  }
  std::string uri;
  if (info.scheme == "memory") {
    uri = "memory://";
  } else if (info.scheme == "file") {
    uri = "file://" + (work_dir / "file-locks").string();
  } else {
    auto server = compare::server_uri_for(info.scheme);  // the launcher's variable, the scheme replaced
    if (!server.uri) return {std::nullopt, server.not_run_because};
    uri = *server.uri;
  }
  uri = with_parameter(uri, "ttl=" + std::to_string(run_ttl.count()) + "ms");
  const auto accepts = [&](std::string_view key) {
    return std::ranges::find(info.parameters, key) != info.parameters.end();
  };
  // A healthy run restarts no server: it must not wait out a ttl because the launcher (or a
  // test) started the server just now. The fault runs keep the safe default.
  if (f == fault::healthy && accepts("wait_after_restart")) uri = with_parameter(uri, "wait_after_restart=false");
  if (f == fault::healthy && accepts("restart_delay")) uri = with_parameter(uri, "restart_delay=off");
  // A session-bound lock lives as long as its session, not its ttl (zookeeper ignores ttl): the
  // session gets the same 1 s, or a dead holder would keep its lock for the default 10 s.
  if (accepts("session_timeout")) uri = with_parameter(uri, "session_timeout=" + std::to_string(run_ttl.count()) + "ms");
  if (!info.unsafe_because.empty()) uri = with_parameter(uri, "unsafe=true");  // the row exists to show it fail
  return {uri, {}};
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
    throw dlock::error(e.code(), scheme + " is unreachable: " + e.detail() +
                                     " (start its server: compose/native/dlock-servers up)");
  }
}

// A temporary folder for the histories and the file:// locks, removed at the end.
class temporary_folder {
 public:
  temporary_folder() {
    std::string pattern = (fs::temp_directory_path() / "dlock-compare-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a folder in " + fs::temp_directory_path().string());
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

}  // namespace

int cmd_compare(const arguments& argv) {
  const args a(argv, {"backends", "faults", "duration", "clients", "json", "markdown"}, {"help"});
  if (a.flag("help")) {
    std::puts(usage);
    return 0;
  }
  if (!a.positional().empty()) throw usage_error("takes no operands; got '" + redact_for_message(a.positional().front()) + "'");
  const auto schemes = backends_asked(a);
  const auto faults = faults_asked(a);
  const auto duration = a.duration("duration").value_or(2s);
  if (duration <= milliseconds::zero()) throw usage_error("--duration must be positive");
  const auto clients = static_cast<std::uint32_t>(a.integer("clients", 3, 2, 64));
  auto json = output_file(a, "json");
  auto markdown = output_file(a, "markdown");

  temporary_folder work;
  compare::scenario_settings settings;
  settings.worker_executable = self_executable();
  settings.worker_subcommand = {"compare-worker"};
  settings.clients = clients;
  settings.duration = duration;
  settings.ttl = run_ttl;

  // Every cell planned and every server probed before anything runs.
  std::vector<planned_cell> plan;
  const auto infos = default_registry().list();
  for (const auto& scheme : schemes) {
    const auto& info = *std::ranges::find(infos, scheme, &backend_info::scheme);
    std::string refused;
    for (const auto f : faults) {
      auto uri = uri_for(info, f, work.path());
      if (uri.uri && refused.empty()) refused = probe(*uri.uri, scheme);
      if (!refused.empty()) uri = {std::nullopt, refused};
      plan.push_back({&info, f, std::move(uri)});
    }
  }

  milliseconds left{};
  for (const auto& p : plan)
    if (p.uri.uri) left += compare::run_length(p.scenario, settings) + 1s;

  compare::matrix m;
  m.backends = schemes;
  m.faults = faults;
  m.ttl = run_ttl;
  m.duration = duration;
  m.clients = clients;
  std::size_t index = 0;
  for (const auto& p : plan) {
    ++index;
    compare::matrix_cell cell;
    cell.backend = p.info->scheme;
    cell.scenario = p.scenario;
    if (!p.uri.uri) {
      cell.text = "not run: " + p.uri.not_run_because;
      m.cells.push_back(std::move(cell));
      continue;
    }
    std::fprintf(stderr, "dlock compare: [%zu/%zu] %s on %s (about %llds left)\n", index, plan.size(),
                 std::string(compare::to_string(p.scenario)).c_str(), p.info->scheme.c_str(),
                 static_cast<long long>(std::chrono::ceil<std::chrono::seconds>(left).count()));
    settings.uri = *p.uri.uri;
    if (p.scenario == fault::server_restart) {
      settings.launcher = std::getenv("DLOCK_SERVERS");  // checked by uri_for
      settings.server_process = launcher_process(p.info->scheme);
    }
    settings.acquire_has_two_commands = compare::acquire_has_two_commands(*p.info);
    settings.name = "dlock-compare/" + std::to_string(::getpid()) + "/cell-" + std::to_string(index);
    settings.work_dir = work.path() / ("cell-" + std::to_string(index));
    fs::create_directories(settings.work_dir);
    cell.uri = redacted(settings.uri);
    cell.result = compare::run_scenario(p.scenario, settings);
    cell.text = compare::observation(p.scenario, *cell.result);
    left -= std::min(left, compare::run_length(p.scenario, settings) + 1s);
    m.cells.push_back(std::move(cell));
  }

  std::fputs(compare::to_text(m).c_str(), stdout);
  if (json) *json << compare::to_json(m);
  if (markdown) *markdown << compare::to_markdown(m);
  return 0;
}

int cmd_compare_worker(const arguments& argv) { return compare::worker_main(argv); }

}  // namespace dlock::cli
