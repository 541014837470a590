// dlock: the command-line tool. Dispatches to one file per subcommand.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <unistd.h>

#include "args.hpp"
#include "command_group.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/error.hpp"

namespace {

constexpr const char* usage_text =
    "usage: dlock <command> [options]\n"
    "\n"
    "commands:\n"
    "  run URI NAME [--shared | --write | --permits N --of M] [--wait D] [--ttl D] [--grace D] -- CMD ARGS...\n"
    "                      run CMD while holding the lock (like flock(1)); kills CMD's process group\n"
    "                      if the lease is lost or dlock dies. Default: the exclusive lock NAME;\n"
    "                      --shared / --write: the read / write side of the reader-writer lock NAME\n"
    "                      (another object than the default's lock: readers and writers of a name\n"
    "                      must all use these two); --permits N --of M: N permits of the semaphore\n"
    "                      NAME of M permits\n"
    "  elect URI NAME [--wait D] [--ttl D] [--grace D] -- CMD ARGS...\n"
    "                      campaign in the leader election NAME, run CMD while leading (it gets\n"
    "                      DLOCK_TERM = DLOCK_FENCING_TOKEN); kills CMD's process group if demoted (70)\n"
    "  elect URI NAME --observe [--interval D]\n"
    "                      print each change of leader: '<term> <leader id> <UTC time>'\n"
    "  hold URI NAME [--shared | --write | --permits N --of M] [--wait D] [--ttl D]\n"
    "                      acquire, print 'acquired <token|->', hold until stdin closes or SIGTERM\n"
    "  backends [--markdown]\n"
    "                      list the backends built in and found through DLOCK_PLUGIN_PATH\n"
    "  bench URI [--threads N] [--names K] [--duration D] [--json]\n"
    "                      acquire+release throughput, latency percentiles and handoff time\n"
    "  demo [URI] [--workers N] [--stock S]\n"
    "                      the flash-sale demo: worker processes selling stock with and without the lock\n"
    "  sweep URI           delete the expired lock records the server keeps (SQL table schemes:\n"
    "                      expired rows, also other tools'); live locks are never touched\n"
    "  inspect URI NAME [--json]\n"
    "                      whether NAME is held, by whom (owner, kind, token, ttl left), and its waiters\n"
    "  list URI [--prefix P] [--json]\n"
    "                      the names held now, where the server can enumerate them\n"
    "  break URI NAME --force\n"
    "                      remove NAME's current grant(s) (a stuck holder); prints whom it removed\n"
    "  compare [--backends LIST] [--faults LIST] [--duration D] [--clients N] [--json FILE] [--markdown FILE]\n"
    "          [--log FILE]\n"
    "                      every backend side by side under faults (holder killed, paused past its\n"
    "                      ttl in or before its write): client processes, a recorded resource, a\n"
    "                      checker; a table backend x fault\n"
    "\n"
    "URI: every command taking one also reads it from '--uri-file PATH' (one line) or, when neither\n"
    "     is on the command line, from the environment variable DLOCK_URI: keeps passwords out of ps\n"
    "durations: 500ms, 2s, 1.5s, 1m ('--wait 0' = one try)\n"
    "exit status: the command's own status (run, elect), or\n"
    "  64 usage error (also: the backend lacks the primitive asked for)\n"
    "  65 the name is in use on the server as something else (a semaphore against a lock, a\n"
    "     semaphore of another size or of a layout that records no holders)\n"
    "  69 backend unreachable or failing   70 lock (or leadership) lost while running\n"
    "  75 could not get the lock in time   130/143 SIGINT/SIGTERM while waiting for it\n"
    "'dlock <command> --help' shows the command's usage.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace dlock::cli;
  remember_inherited_fds();  // before anything of dlock's own is opened
  if (argc < 2) {
    std::fputs(usage_text, stderr);
    return exit_usage;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage_text, stdout);
    return 0;
  }
  const std::map<std::string, int (*)(const arguments&)> commands = {
      {"run", cmd_run},         {"hold", cmd_hold},       {"backends", cmd_backends},
      {"bench", cmd_bench},     {"demo", cmd_demo},       {"demo-worker", cmd_demo_worker},
      {"sweep", cmd_sweep},     {"compare", cmd_compare}, {"compare-worker", cmd_compare_worker},
      {"inspect", cmd_inspect}, {"list", cmd_list},       {"break", cmd_break},
      {"elect", cmd_elect}};
  auto it = commands.find(command);
  if (it == commands.end()) {
    // Redacted: a URI typed where the command belongs must not show its password.
    std::fprintf(stderr, "dlock: unknown command '%s'\n%s", redact_for_message(command).c_str(), usage_text);
    return exit_usage;
  }
  const arguments rest(argv + 2, argv + argc);
  try {
    return it->second(rest);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "dlock %s: %s\n(see 'dlock %s --help')\n", command.c_str(), scrub_secrets(e.what()).c_str(),
                 command.c_str());
    return exit_usage;
  } catch (const dlock::error& e) {
    // A timeout's message is the CLI's own full sentence; other errors keep the category's words.
    const std::string message = e.code() == dlock::errc::timeout ? e.detail() : e.what();
    std::fprintf(stderr, "dlock %s: %s\n", command.c_str(), scrub_secrets(message).c_str());
    if (e.code() == dlock::errc::invalid_uri || e.code() == dlock::errc::unknown_scheme ||
        e.code() == dlock::errc::invalid_name || e.code() == dlock::errc::invalid_argument ||
        // Asked for a primitive (or capability) the backend does not have: no retry can help.
        e.code() == dlock::errc::missing_capability || e.code() == dlock::errc::not_supported)
      return exit_usage;
    if (e.code() == dlock::errc::name_conflict) return exit_conflict;
    if (e.code() == dlock::errc::timeout) return exit_timeout;
    if (e.code() == dlock::errc::lock_lost || e.code() == dlock::errc::not_owner) return exit_software;
    return exit_unavailable;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock %s: %s\n", command.c_str(), scrub_secrets(e.what()).c_str());
    return exit_unavailable;
  }
}

namespace dlock::cli {
std::string self_executable() {
  char buf[4096];
  const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "dlock";
  return std::string(buf, static_cast<std::size_t>(n));
}
}  // namespace dlock::cli
