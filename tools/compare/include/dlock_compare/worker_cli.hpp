#pragma once
// The worker's command line, for any program that runs as a comparison worker:
//   [--uri URI] --name NAME --history FILE --client ID --duration D
//   [--fence FILE] [--start-at-ns NS] [--work D] [--acquire-timeout D] [--stop-once-marker FILE]
// Without --uri, the URI is the environment variable DLOCK_URI (kept out of `ps`).
// Starts at the shared-clock instant NS (default: now), stops acquiring D later, prints
// "done attempts=A grants=G". Returns the exit code: 0 done, 2 usage, dlock or file error.
#include <string>
#include <vector>

namespace dlock::compare {

int worker_main(const std::vector<std::string>& args);  // the arguments after the program (and subcommand)

}  // namespace dlock::compare
