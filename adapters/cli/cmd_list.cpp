// dlock list URI [--prefix P] [--json]: the names held now (backend::list), one a line.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"
#include "inspection_output.hpp"

namespace dlock::cli {

int cmd_list(const arguments& argv) {
  const args a(argv, {"uri-file", "prefix"}, {"help", "json"});
  if (a.flag("help")) {
    std::puts("usage: dlock list [URI] [--uri-file PATH] [--prefix P] [--json]  (or the URI in DLOCK_URI)\n"
              "prints the lock names held now (starting with P), one a line, where the backend's server\n"
              "can enumerate them.\n"
              "exit: 0 done, 64 usage error or the backend cannot list, 69 backend failure");
    return 0;
  }
  auto backend = dlock::open(take_required_uri(a, 0, "expected one URI").uri);
  const auto names = backend->list(a.get("prefix").value_or(""));
  if (a.flag("json")) {
    std::string out = "[";
    for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + json_string(names[i]);
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  for (const auto& n : names) std::printf("%s\n", n.c_str());
  return 0;
}

}  // namespace dlock::cli
