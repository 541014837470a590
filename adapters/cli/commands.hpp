#pragma once
// One function per subcommand, each in its own file. They receive the arguments after the
// subcommand's name and return the process exit status.
#include <string>
#include <vector>

namespace dlock::cli {

using arguments = std::vector<std::string>;

int cmd_run(const arguments& a);
int cmd_elect(const arguments& a);
int cmd_hold(const arguments& a);
int cmd_backends(const arguments& a);
int cmd_bench(const arguments& a);
int cmd_demo(const arguments& a);
int cmd_demo_worker(const arguments& a);
int cmd_sweep(const arguments& a);
int cmd_inspect(const arguments& a);
int cmd_list(const arguments& a);
int cmd_break(const arguments& a);
int cmd_compare(const arguments& a);
int cmd_compare_worker(const arguments& a);  // hidden: one client process of a compare run

// The path of this executable (for `demo` to start its workers).
std::string self_executable();

}  // namespace dlock::cli
