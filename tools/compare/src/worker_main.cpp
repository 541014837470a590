// dlock_compare_worker: one client process of a comparison run (see dlock_compare/worker.hpp and
// dlock_compare/worker_cli.hpp for its flags and exit codes).
#include <string>
#include <vector>

#include "dlock_compare/worker_cli.hpp"

int main(int argc, char** argv) { return dlock::compare::worker_main(std::vector<std::string>(argv + 1, argv + argc)); }
