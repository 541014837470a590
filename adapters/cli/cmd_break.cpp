// dlock break URI NAME --force: removes the current grant(s) of NAME on the server
// (backend::force_release), for an operator recovering from a holder known to be dead or stuck.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"
#include "inspection_output.hpp"

namespace dlock::cli {

int cmd_break(const arguments& argv) {
  const args a(argv, {"uri-file"}, {"help", "force"});
  if (a.flag("help")) {
    std::puts("usage: dlock break [URI] NAME --force [--uri-file PATH]  (or the URI in DLOCK_URI)\n"
              "removes the current grant(s) of NAME on the server, whoever holds them, and prints whom\n"
              "it removed. If the holder is in fact alive it keeps working without the lock: mutual\n"
              "exclusion is broken until it notices (its lease reports the loss, its release fails).\n"
              "--force is required to say you know this.\n"
              "exit: 0 done, 64 usage error, no --force or the backend cannot break, 69 backend failure");
    return 0;
  }
  const auto taken = take_required_uri(a, 1, "expected URI NAME");
  if (!a.flag("force"))
    throw usage_error("refusing to break a lock without --force: a holder that is still alive would go on "
                      "working without the lock (check it is dead or stuck with 'dlock inspect' first)");
  const auto& name = taken.operands.at(0);
  auto backend = dlock::open(taken.uri);
  const auto removed = backend->force_release(name);  // throws dlock::error -> 64 (not_supported) / 69
  if (removed.empty()) {
    std::printf("%s: nothing to break (not held)\n", name.c_str());
    return 0;
  }
  for (const auto& h : removed) std::printf("removed %s\n", holder_line(h).c_str());
  return 0;
}

}  // namespace dlock::cli
