// dlock hold [URI] NAME [--shared | --write | --permits N --of M] [--wait D] [--ttl D]: the
// conformance suite's taker in another process (of the mutex, a side of the rw lock, or permits).
// Prints "acquired <token|->", then holds until stdin closes or SIGTERM/SIGINT, then releases.
// --metrics HOST:PORT serves its lock metrics meanwhile.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <poll.h>
#include <stop_token>
#include <unistd.h>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "metrics_endpoint.hpp"

namespace dlock::cli {

int cmd_hold(const arguments& argv) {
  const args a(argv, {"wait", "ttl", "uri-file", "permits", "of", "metrics"}, {"help", "shared", "write"});
  if (a.flag("help")) {
    std::puts("usage: dlock hold [URI] NAME [--shared | --write | --permits N --of M] [--uri-file PATH]\n"
              "                  [--wait D] [--ttl D] [--metrics HOST:PORT]\n"
              "acquires the lock (or with --shared / --write a side of the reader-writer lock NAME, or\n"
              "with --permits N --of M N permits of the M-permit semaphore NAME: see 'dlock run --help')\n"
              "(waiting up to D, connecting included; default forever; --wait 0 =\n"
              "one try), prints 'acquired <fencing token or ->', holds until stdin closes or SIGTERM,\n"
              "then releases.\n"
              "The URI may come from --uri-file PATH or the environment variable DLOCK_URI instead.\n"
              "SIGINT/SIGTERM while waiting: exit 130/143 without acquiring.\n"
              "--metrics HOST:PORT serves the lock's Prometheus metrics at http://HOST:PORT/metrics while\n"
              "it waits and holds (port 0: a free one; stderr says which).\n"
              "exit: 0 released, 75 not acquired in time, 70 lost while held, 69 backend failure");
    return 0;
  }
  const auto [uri, operands] = take_uri(a, 1, "expected [URI] NAME");
  if (!uri) throw usage_error("no URI: give it before NAME, in --uri-file PATH, or in DLOCK_URI");
  if (a.has_command_separator()) throw usage_error("expected [URI] NAME, and no '-- CMD'");
  auto ttl = a.duration("ttl");
  auto wait = a.duration("wait");
  auto primitive = parse_primitive(a);
  lock_request request{*uri, operands.front(), ttl, wait, primitive, nullptr, {}};
  check_locally(request);  // before anything connects: a usage error is 64 even with the server down
  const auto metrics = serve_metrics(a);
  if (metrics) request.observer = metrics->observer();
  auto& events = event_pipe::instance();
  events.catch_signals();
  held_lock got = open_and_acquire(request, "hold");
  lease& held = got.held;
  const std::string what = describe(request.primitive, request.name);
  std::stop_callback on_lost(held.lost_token(), [&events] { events.post(event_pipe::lost); });
  std::printf("acquired %s\n", token_text(held).c_str());
  std::fflush(stdout);

  pollfd fds[2] = {{events.read_fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
  for (bool done = false; !done;) {
    if (::poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[1].revents) {
      char buf[256];
      if (::read(STDIN_FILENO, buf, sizeof buf) <= 0) done = true;  // stdin closed
    }
    if (fds[0].revents) {
      char e;
      while (::read(events.read_fd(), &e, 1) == 1) {
        if (e == event_pipe::lost) {
          std::fprintf(stderr, "dlock: %s lost (%s)\n", what.c_str(), held.lost_reason().message().c_str());
          discard_lost(held);
          return exit_software;
        }
        if (e == SIGTERM || e == SIGINT || e == SIGHUP) done = true;
      }
    }
  }
  held.release();  // throws not_owner (exit 70) if it was no longer ours
  return 0;
}

}  // namespace dlock::cli
