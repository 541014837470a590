// dlock run [URI] NAME [NAME...] [--shared | --write | --permits N --of M] [--wait D] [--ttl D]
// [--grace D] -- CMD ARGS...: flock(1) for distributed locks. Holds the lock (or a side of the
// reader-writer lock, or permits of a semaphore: primitive.hpp; or, for several NAMEs, every lock
// of the set, taken as one: dlock/multi_lock.hpp) while CMD runs (the core's watchdog renews renewable leases). CMD
// runs as a process group of its own that cannot outlive dlock (command_group.hpp): SIGINT/SIGTERM/SIGHUP are forwarded
// to the whole group, and if the lease is lost the whole group is killed (SIGTERM, then SIGKILL after the grace period)
// and dlock exits 70: no part of CMD may go on believing it is alone. What is left of the group when CMD itself ends is
// stopped the same way before the lock is released.
#include <chrono>
#include <csignal>
#include <cstdio>
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

constexpr const char* run_usage =
    "usage: dlock run [URI] NAME [NAME...] [--shared | --write | --permits N --of M] [--uri-file PATH]\n"
    "                 [--wait D] [--ttl D] [--grace D] -- CMD ARGS...\n"
    "runs CMD while holding the lock NAME on URI (like flock(1)).\n"
    "  NAME NAME...  several names: CMD runs while holding the exclusive locks of all of them, taken as\n"
    "             one set: in byte order of the names whatever order they are given in (so two dlock\n"
    "             runs naming the same locks in any order cannot deadlock), within the one --wait for\n"
    "             the whole set, and all or nothing (on a timeout, an error or a signal every name\n"
    "             already taken is released). Losing any of them ends CMD as losing a single lock does.\n"
    "             Each NAME once; --shared, --write and --permits take one NAME\n"
    "  (default)  the exclusive lock (mutex) NAME: one holder at a time\n"
    "  --shared   the read side of the reader-writer lock NAME: many --shared holders at once, none\n"
    "             while a --write holder has it (like flock -s)\n"
    "  --write    the write side of the reader-writer lock NAME: alone, no --shared holder beside it\n"
    "             (like flock -x). The default's mutex NAME counts as a writer of the same lock: it\n"
    "             excludes --shared and --write holders of NAME, and they exclude it\n"
    "  --permits N --of M\n"
    "             N permits of the semaphore NAME of M permits (1 <= N <= M): at most M permits held\n"
    "             at once; every process must give the same M. A semaphore NAME is never held beside\n"
    "             a lock NAME: taking one while the other is held is refused (exit 65)\n"
    "             (--shared, --write and --permits need a backend that makes the primitive: see\n"
    "             `dlock backends`; another is refused with exit 64 before connecting)\n"
    "  URI        the backend; or --uri-file PATH (a file holding the URI on one line), or the\n"
    "             environment variable DLOCK_URI: keeps a password out of `ps`\n"
    "  --wait D   wait at most D for the lock, connecting included (default: forever; 0 = one try);\n"
    "             whatever the server does, dlock gives up at most 0.5s after D\n"
    "  --ttl D    the lease's ttl on expiring backends (renewed by the watchdog)\n"
    "  --grace D  after the lease is lost: SIGTERM to CMD's process group, SIGKILL after D (default 2s)\n"
    "CMD runs in a process group of its own; signals go to the whole group, and the group is killed\n"
    "when the lease is lost or dlock dies. CMD gets DLOCK_LOCK_NAME, and DLOCK_FENCING_TOKEN where\n"
    "the backend has one: check it at the resource, the only defence when dlock is stopped (SIGSTOP).\n"
    "With several NAMEs, CMD gets instead DLOCK_LOCK_COUNT=N and, for i = 1..N in the order the\n"
    "names were taken (byte order), DLOCK_LOCK_NAME_<i> and DLOCK_FENCING_TOKEN_<i> (each name's own\n"
    "token: give each resource the token of its name).\n"
    "SIGINT/SIGTERM while waiting for the lock: exit 130/143, CMD is not started.\n"
    "exit: CMD's status (128+signal if killed), 64 usage, 65 the name is in use on the server as\n"
    "      something else (a semaphore against a lock, another size, a foreign layout), 69 backend\n"
    "      failure, 70 lock lost while CMD ran (CMD is killed), 75 not acquired in time";

int status_of(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);  // the shell's convention
  return exit_software;
}

struct run_request {
  lock_request lock;
  std::chrono::milliseconds grace;
  std::vector<std::string> command;
};

// Every argument is checked here, before anything connects: a typo is a usage error (64) even
// when the server is down, never a backend error (69).
run_request parse(const args& a) {
  const auto [uri, operands] = take_uri_and_names(a, "expected [URI] NAME [NAME...] -- CMD ARGS...");
  if (!uri) throw usage_error("no URI: give it before NAME, in --uri-file PATH, or in DLOCK_URI");
  if (!a.has_command_separator() || a.command().empty()) throw usage_error("expected '-- CMD ARGS...' after NAME");
  // Every part is parsed before the aggregate is built: when a later initializer threw (a usage
  // error such as --grace 2x), GCC 12 destroyed the lock_request already built inside it twice
  // (a double free, exit 134 instead of 64).
  auto ttl = a.duration("ttl");
  auto wait = a.duration("wait");
  auto primitive = parse_primitive(a);
  const auto grace = a.duration("grace").value_or(std::chrono::seconds(2));
  std::vector<std::string> set;
  if (operands.size() > 1) set = operands;
  run_request r{{*uri, operands.front(), ttl, wait, primitive, nullptr, std::move(set)}, grace, a.command()};
  check_locally(r.lock);
  return r;
}

}  // namespace

int cmd_run(const arguments& argv) {
  const args a(argv, {"wait", "ttl", "grace", "uri-file", "permits", "of"}, {"help", "shared", "write"});
  if (a.flag("help")) {
    std::puts(run_usage);
    return 0;
  }
  const run_request request = parse(a);
  const std::string& program = request.command.front();

  auto& events = event_pipe::instance();
  events.catch_signals();
  held_lock got = open_and_acquire(request.lock, "run");
  lease& held = got.held;
  multi_lease& held_set = got.held_set;  // instead of `held` for several NAMEs
  const bool one = !got.multi;
  const std::string what = describe(request.lock);
  std::stop_callback on_lost(one ? held.lost_token() : held_set.lost_token(),
                             [&events] { events.post(event_pipe::lost); });

  std::vector<std::string> env;
  if (one) {
    env.push_back("DLOCK_LOCK_NAME=" + request.lock.name);
    if (auto t = held.fencing_token()) env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(*t));
  } else {
    const auto members = held_set.members();
    env.push_back("DLOCK_LOCK_COUNT=" + std::to_string(members.size()));
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      env.push_back("DLOCK_LOCK_NAME_" + n + "=" + std::string(members[i].name()));
      if (auto t = members[i].fencing_token()) env.push_back("DLOCK_FENCING_TOKEN_" + n + "=" + std::to_string(*t));
    }
  }
  exit_if_interrupted(got, "run", what);  // the last moment before anything starts
  command_group group(request.command, env);

  bool signalled = false;  // a forwarded signal is on its way to the whole group
  if (!supervise_until_exit_or_loss(group, request.grace, signalled)) {
    if (one) {
      std::fprintf(stderr, "dlock: %s lost (%s); killed %s and its process group\n", what.c_str(),
                   held.lost_reason().message().c_str(), program.c_str());
      discard_lost(held);
    } else {
      std::fprintf(stderr, "dlock: lock '%s' of %s lost (%s); killed %s and its process group\n",
                   held_set.lost_member().c_str(), what.c_str(), held_set.lost_reason().message().c_str(),
                   program.c_str());
      std::error_code ignored;  // the lost member's release can only find it gone
      held_set.release(ignored);
    }
    return exit_software;
  }
  if (!group.empty()) {
    // Its children must not work on without the lock: stopped before it is released.
    if (!signalled)
      std::fprintf(stderr, "dlock: %s exited while processes it started still ran; stopping them before releasing %s\n",
                   program.c_str(), what.c_str());
    group.terminate(request.grace);
  }
  std::error_code ec;
  if (one)
    held.release(ec);
  else
    held_set.release(ec);
  if (ec) {
    std::fprintf(stderr, "dlock: %s was no longer ours when %s finished (%s): its work was not protected\n",
                 what.c_str(), program.c_str(), last_error_message().c_str());
    return exit_software;
  }
  return status_of(*group.reap());
}

}  // namespace dlock::cli
