// dlock sweep [URI]: deletes the expired lock records a backend's server keeps (the SQL table
// schemes' expired rows, also those other tools wrote; with fair=true, dead waiters) through
// backend::sweep_expired. Backends whose server expires records itself have nothing to sweep.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"

namespace dlock::cli {

int cmd_sweep(const arguments& argv) {
  const args a(argv, {"uri-file"}, {"help"});
  if (a.flag("help")) {
    std::puts("usage: dlock sweep [URI] [--uri-file PATH]  (or the URI in DLOCK_URI)\n"
              "deletes the expired lock records the backend's server keeps (e.g. expired rows of the\n"
              "postgres+index / mysql+index table, also rows other tools wrote; dead waiters with\n"
              "fair=true; expired grants of the version schemes are freed, their rows kept). Live\n"
              "locks are never touched. Prints 'swept N expired rows from <table>', or 'nothing to\n"
              "sweep' for a backend whose server expires its records itself.\n"
              "exit: 0 done, 64 usage error, 69 backend failure");
    return 0;
  }
  auto backend = dlock::open(
      take_required_uri(a, 0, "expected one URI").uri);  // dlock::error -> exit 64 (bad URI) / 69 (unreachable)
  const auto target = backend->sweep_target();
  if (target.empty()) {
    std::printf("nothing to sweep: %s keeps no expired lock records (its server expires them, or a lock lives "
                "only as long as its holder's connection or process)\n",
                backend->redacted_uri().c_str());
    return 0;
  }
  const auto swept = backend->sweep_expired();  // throws dlock::error -> exit 69
  std::printf("swept %zu expired %s from %s\n", swept, swept == 1 ? "row" : "rows", target.c_str());
  return 0;
}

}  // namespace dlock::cli
