// dlock elect [URI] NAME [--ttl D] [--wait D] [--grace D] -- CMD ARGS...: campaigns in the election
// NAME (backend::make_election: leadership is a lease of the lock NAME, its term the fencing token),
// then runs CMD while this process leads, exactly as `dlock run` runs it under a lock: CMD leads a
// process group of its own that cannot outlive dlock (command_group.hpp), signals go to the whole
// group, and when the leadership is lost the group is killed and dlock exits 70. When CMD exits,
// dlock resigns and exits with CMD's status.
// dlock elect [URI] NAME --observe [--interval D]: prints a line "<term> <leader id> <UTC time>"
// each time the leader changes ("- -" while nobody leads), until SIGINT/SIGTERM.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <poll.h>
#include <stop_token>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "args.hpp"
#include "command_group.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace dlock::cli {
namespace {

constexpr const char* elect_usage =
    "usage: dlock elect [URI] NAME [--uri-file PATH] [--wait D] [--ttl D] [--grace D] -- CMD ARGS...\n"
    "       dlock elect [URI] NAME --observe [--interval D]\n"
    "campaigns in the leader election NAME on URI, then runs CMD while this process leads.\n"
    "  Leadership is a lease of the lock NAME (the election is that lock: `dlock run URI NAME` and a\n"
    "  library candidate of backend->make_election(NAME) compete with it). It needs a backend with\n"
    "  fencing and lost_notification (`dlock backends`); another is refused with exit 64.\n"
    "  URI        the backend; or --uri-file PATH, or the environment variable DLOCK_URI\n"
    "  --wait D   campaign at most D, connecting included (default: forever; 0 = one try)\n"
    "  --ttl D    the leadership's ttl on expiring backends (renewed while leading): a leader that\n"
    "             dies is replaced within about D\n"
    "  --grace D  after the leadership is lost: SIGTERM to CMD's process group, SIGKILL after D (2s)\n"
    "  --observe  print each change of leader as a line '<term> <leader id> <UTC time>' ('-' for\n"
    "             what the server does not record, '- -' while nobody leads) until SIGINT/SIGTERM;\n"
    "             the leader id is the candidate's owner id where the backend's layout records it\n"
    "             (see `dlock inspect`); needs a backend that can inspect a lock\n"
    "  --interval D  how often --observe asks the server (default 500ms)\n"
    "CMD gets DLOCK_ELECTION_NAME, DLOCK_LEADER_ID, DLOCK_TERM and DLOCK_FENCING_TOKEN (the same\n"
    "value: terms strictly increase with each new leader). Check it at the resource you write: it is\n"
    "the only defence when the leader is stopped (SIGSTOP, a pause) past its ttl.\n"
    "SIGINT/SIGTERM while campaigning: exit 130/143, CMD is not started.\n"
    "exit: CMD's status (128+signal if killed), 0 after --observe is stopped, 64 usage (or a backend\n"
    "      without election), 69 backend failure, 70 leadership lost while CMD ran (CMD is killed),\n"
    "      75 not elected in time";

int status_of(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return exit_software;
}

// Refuses, before connecting, a scheme whose lock cannot carry a term and a demotion.
void check_electable(const std::string& uri_text) {
  const auto scheme = uri::parse(uri_text).scheme();
  const auto info = default_registry().find(scheme);
  if (!info) return;  // dlock::open names the unknown scheme
  const auto lacking = info->caps.missing({capability::fencing, capability::lost_notification});
  if (!lacking.empty())
    throw error(errc::not_supported, scheme + ":// makes no election: its lock lacks " + lacking.to_string() +
                                         " (`dlock backends` lists the schemes with fencing and lost_notification)");
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

int observe(const std::string& uri_text, const std::string& name, std::chrono::milliseconds interval) {
  auto& events = event_pipe::instance();
  events.catch_signals();
  auto backend = dlock::open(uri_text);
  auto vote = backend->make_election(name);
  std::optional<std::string> shown;  // the last line's "<term> <id>"
  pollfd fd{events.read_fd(), POLLIN, 0};
  for (;;) {
    const leader_info now = vote->leader();  // throws: 64 when it cannot inspect, 69 on failure
    const std::string line = !now.elected ? std::string("- -")
                                          : (now.term ? std::to_string(*now.term) : std::string("-")) + " " +
                                                (now.id.empty() ? std::string("-") : now.id);
    if (line != shown) {
      std::printf("%s %s\n", line.c_str(), utc_now().c_str());
      std::fflush(stdout);
      shown = line;
    }
    if (::poll(&fd, 1, static_cast<int>(interval.count())) <= 0) continue;
    for (char e; ::read(events.read_fd(), &e, 1) == 1;)
      if (is_termination_signal(static_cast<unsigned char>(e))) return 0;
  }
}

}  // namespace

int cmd_elect(const arguments& argv) {
  const args a(argv, {"wait", "ttl", "grace", "uri-file", "interval"}, {"help", "observe"});
  if (a.flag("help")) {
    std::puts(elect_usage);
    return 0;
  }
  const auto [uri, operands] = take_uri(a, 1, "expected [URI] NAME -- CMD ARGS...");
  if (!uri) throw usage_error("no URI: give it before NAME, in --uri-file PATH, or in DLOCK_URI");
  const std::string& name = operands.front();
  if (name.empty()) throw usage_error("the election NAME is empty; expected a name of at least one byte");
  if (a.flag("observe")) {
    if (a.has_command_separator()) throw usage_error("--observe runs no command: drop '-- CMD ARGS...'");
    const auto interval = a.duration("interval").value_or(std::chrono::milliseconds(500));
    if (interval <= std::chrono::milliseconds::zero() || interval > std::chrono::hours(1))
      throw usage_error("--interval must be from 1ms to 1h");
    check_electable(*uri);
    return observe(*uri, name, interval);
  }
  if (!a.has_command_separator() || a.command().empty()) throw usage_error("expected '-- CMD ARGS...' after NAME");
  auto ttl = a.duration("ttl");
  auto wait = a.duration("wait");
  const auto grace = a.duration("grace").value_or(std::chrono::seconds(2));
  lock_request request{*uri, name, ttl, wait, primitive_request{}, nullptr};
  request.election = true;
  check_locally(request);
  check_electable(*uri);
  const std::vector<std::string>& command = a.command();
  const std::string& program = command.front();

  auto& events = event_pipe::instance();
  events.catch_signals();
  // The campaign is the acquire of the election's lock (backend::make_election, which refuses a
  // scheme without fencing or lost notification): the same wait, with signals answered meanwhile.
  held_lock got = open_and_acquire(request, "elect");
  exit_if_interrupted(got, "elect", "the leadership of '" + name + "'");
  leadership leading(std::move(got.held), got.vote->id());
  std::stop_callback on_demoted(leading.demoted_token(), [&events] { events.post(event_pipe::lost); });

  const std::string term = std::to_string(leading.term());
  const std::vector<std::string> env = {"DLOCK_ELECTION_NAME=" + name, "DLOCK_LEADER_ID=" + leading.id(),
                                        "DLOCK_TERM=" + term, "DLOCK_FENCING_TOKEN=" + term};
  std::fprintf(stderr, "dlock: leading '%s', term %s, as %s\n", name.c_str(), term.c_str(), leading.id().c_str());
  command_group group(command, env);

  bool signalled = false;
  if (!supervise_until_exit_or_loss(group, grace, signalled)) {
    std::fprintf(stderr, "dlock: leadership of '%s' (term %s) lost (%s); killed %s and its process group\n",
                 name.c_str(), term.c_str(), leading.demoted_reason().message().c_str(), program.c_str());
    discard_lost(leading.grant());
    return exit_software;
  }
  if (!group.empty()) {
    if (!signalled)
      std::fprintf(stderr, "dlock: %s exited while processes it started still ran; stopping them before resigning\n",
                   program.c_str());
    group.terminate(grace);
  }
  std::error_code ec;
  leading.resign(ec);
  if (ec) {
    std::fprintf(stderr,
                 "dlock: leadership of '%s' (term %s) was gone when %s finished (%s): its work was not protected\n",
                 name.c_str(), term.c_str(), program.c_str(), last_error_message().c_str());
    return exit_software;
  }
  return status_of(*group.reap());
}

}  // namespace dlock::cli
