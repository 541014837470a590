// dlock inspect URI NAME [--json]: what the backend's server knows of the lock NAME now
// (backend::inspect): held or not, each holder, the waiters where the server queues them.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"
#include "inspection_output.hpp"

namespace dlock::cli {

int cmd_inspect(const arguments& argv) {
  const args a(argv, {"uri-file"}, {"help", "json"});
  if (a.flag("help")) {
    std::puts("usage: dlock inspect [URI] NAME [--uri-file PATH] [--json]  (or the URI in DLOCK_URI)\n"
              "prints whether NAME is held and, as far as the backend's server records them, each\n"
              "holder (owner id, kind, fencing token, ttl left, since when) and the queued waiters.\n"
              "exit: 0 done (held or not), 64 usage error or the backend cannot inspect, 69 backend failure");
    return 0;
  }
  const auto taken = take_required_uri(a, 1, "expected URI NAME");
  const auto& name = taken.operands.at(0);
  auto backend = dlock::open(taken.uri);
  const auto info = backend->inspect(name);  // throws dlock::error -> 64 (not_supported) / 69
  if (a.flag("json")) {
    std::string out =
        "{\"name\":" + json_string(info.name) + ",\"held\":" + (info.held ? "true" : "false") + ",\"holders\":[";
    for (std::size_t i = 0; i < info.holders.size(); ++i) out += (i ? "," : "") + holder_json(info.holders[i]);
    out += "]";
    if (info.waiters_known) {
      out += ",\"waiters\":[";
      for (std::size_t i = 0; i < info.waiters.size(); ++i) out += (i ? "," : "") + waiter_json(info.waiters[i]);
      out += "]";
    }
    std::printf("%s}\n", out.c_str());
    return 0;
  }
  std::printf("%s: %s\n", info.name.c_str(), info.held ? "held" : "not held");
  for (const auto& h : info.holders) std::printf("holder %s\n", holder_line(h).c_str());
  if (info.waiters_known)
    for (const auto& w : info.waiters) std::printf("waiter %s\n", waiter_line(w).c_str());
  return 0;
}

}  // namespace dlock::cli
