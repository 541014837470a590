// The worker's command line, shared by dlock_compare_worker and `dlock compare-worker` (the CLI
// starts itself as its workers, so an installed `dlock compare` needs no second program).
//   dlock_compare_worker [--uri URI] --name NAME --history FILE --client ID --duration D
//                        [--fence FILE] [--start-at-ns NS] [--work D] [--acquire-timeout D]
//                        [--stop-once-marker FILE]   (see worker_options::stop_once_marker)
//                        [--threads N]   (N clients, ids ID..ID+N-1, threads of this process)
// Starts at the shared-clock instant NS (CLOCK_MONOTONIC nanoseconds; default: now) so every
// client of a run starts contending at once, and stops acquiring D later. The fenced resource's
// file defaults to FILE.fence. Without --uri, the URI is the environment variable DLOCK_URI (how
// worker_fleet passes it: a password on a command line shows in `ps`). Prints "done attempts=A grants=G" at the end.
// Exit codes: 0 done, 2 usage, dlock or file error.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_compare/worker.hpp"
#include "dlock_compare/worker_cli.hpp"
#include "dlock_compare/worker_fleet.hpp"

namespace {

constexpr const char* usage =
    "usage: dlock_compare_worker [--uri URI] --name NAME --history FILE --client ID --duration D\n"
    "                            [--fence FILE] [--start-at-ns NS] [--work D] [--acquire-timeout D]\n"
    "                            [--stop-once-marker FILE] [--threads N]\n"
    "The URI: --uri, or else the environment variable DLOCK_URI (kept out of `ps`).\n";

std::map<std::string, std::string> parse_flags(const std::vector<std::string>& args) {
  static const std::map<std::string, bool> known = {{"uri", false},
                                                    {"name", true},
                                                    {"history", true},
                                                    {"client", true},
                                                    {"duration", true},
                                                    {"fence", false},
                                                    {"start-at-ns", false},
                                                    {"work", false},
                                                    {"acquire-timeout", false},
                                                    {"stop-once-marker", false},
                                                    {"threads", false}};
  std::map<std::string, std::string> flags;
  for (std::size_t i = 0; i < args.size(); i += 2) {  // "--flag value" pairs; a value may be empty
    const std::string& flag = args[i];
    if (flag.rfind("--", 0) != 0 || !known.contains(flag.substr(2)))
      throw std::invalid_argument("unknown argument '" + flag + "'");
    if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value");
    flags[flag.substr(2)] = args[i + 1];
  }
  for (const auto& [name, required] : known)
    if (required && !flags.contains(name)) throw std::invalid_argument("--" + name + " is required");
  return flags;
}

dlock::compare::worker_options options_from(const std::map<std::string, std::string>& flags) {
  using dlock::compare::instant;
  using dlock::compare::shared_clock;
  dlock::compare::worker_options o;
  if (flags.contains("uri")) {
    o.uri = flags.at("uri");
  } else if (const char* from_environment = std::getenv(dlock::compare::worker_uri_variable)) {
    o.uri = from_environment;
  }
  if (o.uri.empty()) throw std::invalid_argument("no URI: expected --uri URI or the environment variable DLOCK_URI");
  o.name = flags.at("name");
  o.history = flags.at("history");
  o.fence = flags.contains("fence") ? std::filesystem::path(flags.at("fence"))
                                    : std::filesystem::path(o.history.string() + ".fence");
  o.client = static_cast<std::uint32_t>(std::stoul(flags.at("client")));
  o.start_at = flags.contains("start-at-ns") ? instant(shared_clock::duration(std::stoll(flags.at("start-at-ns"))))
                                             : shared_clock::now();
  o.stop_at = o.start_at + dlock::parse_duration(flags.at("duration"));
  if (flags.contains("work")) o.work = dlock::parse_duration(flags.at("work"));
  if (flags.contains("acquire-timeout")) o.acquire_timeout = dlock::parse_duration(flags.at("acquire-timeout"));
  if (flags.contains("stop-once-marker")) o.stop_once_marker = flags.at("stop-once-marker");
  if (flags.contains("threads")) o.threads = static_cast<std::uint32_t>(std::stoul(flags.at("threads")));
  if (o.threads == 0) throw std::invalid_argument("--threads must be at least 1");
  return o;
}

}  // namespace

namespace dlock::compare {

int worker_main(const std::vector<std::string>& args) {
  worker_options options;
  try {
    options = options_from(parse_flags(args));
  } catch (const std::exception& e) {
    std::cerr << "dlock_compare_worker: " << e.what() << '\n' << usage;
    return 2;
  }
  try {
    const auto summary = run_worker(options);
    std::cout << "done attempts=" << summary.attempts << " grants=" << summary.grants << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dlock_compare_worker: " << e.what() << '\n';  // dlock messages show redacted URIs only
    return 2;
  }
}

}  // namespace dlock::compare
