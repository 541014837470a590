#pragma once
// min_replicas: a grant (and a renewal) counts only once WAIT has confirmed that at least N
// replicas have it. Internal to the redis backends.
//
// WAIT is not consensus: replication stays asynchronous, WAIT only reports how many replicas
// acknowledged the writes this connection made so far. It cannot run inside a script (Redis
// refuses it there), so it is sent right after the grant script on the same connection, as the
// pipeline's trailer (pipeline.hpp); the fencing counter's INCR is in that script, so the same WAIT
// covers it. See the README's "Replicated grants" for what this does and does not promise.
#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "connection.hpp"

namespace dlock {
class uri;
}

namespace dlock::redis {

struct replication {
  int min_replicas = 0;                    // 0: no WAIT (the default: a grant counts when the master has it)
  std::chrono::milliseconds timeout{100};  // WAIT's own timeout (replica_timeout)

  bool wanted() const noexcept { return min_replicas > 0; }
  // WAIT N timeout, as arguments (views into this object).
  std::vector<std::string_view> wait_command() const;
  // The number of replicas a WAIT reply confirms; -1 when it is not such a reply (an error).
  static long long confirmed(const redisReply* r) noexcept;
  // ec = backend_unavailable: `what` (e.g. "lock 'x' was granted") was confirmed by fewer replicas
  // than asked; says how many and how long it waited.
  void set_short_error(std::error_code& ec, const std::string& label, const std::string& what, const redisReply* r,
                       std::string_view consequence) const;

 private:
  friend replication parse_replication(const uri& u, std::chrono::milliseconds command_timeout);
  std::string n_text_ = "0", timeout_text_ = "100";
};

// min_replicas=N (0..64), replica_timeout=<duration> (default 100ms, under command_timeout).
// Throws dlock::error(invalid_uri).
replication parse_replication(const uri& u, std::chrono::milliseconds command_timeout);

}  // namespace dlock::redis
