#include "renewal.hpp"

#include "replication.hpp"

namespace dlock::redis {

void judge_renewal_reply(const redisReply& r, const std::string& what, std::error_code& ec) {
  if (is_error(&r, "READONLY")) {
    set_error(ec, errc::backend_unavailable,
              "redis: renewing " + what + ": " + std::string(error_text(&r)) +
                  " (the server is a replica now: the master moved)");
  } else if (r.type == REDIS_REPLY_ERROR && !is_error(&r, "WRONGTYPE")) {
    set_error(ec, errc::backend_error, "redis: renewing " + what + ": " + std::string(error_text(&r)));
  } else if (r.type != REDIS_REPLY_INTEGER || r.integer != 1) {
    set_error(ec, errc::lock_lost,
              "redis: " + what +
                  " is gone from the server at renewal (expired, deleted, or the "
                  "server restarted without persistence)");
  }
}

void judge_renewal_replicas(const backend_state& s, const redisReply* wait_reply, const std::string& what,
                            std::error_code& ec) {
  const auto& repl = s.config.replicas;
  if (!repl.wanted() || replication::confirmed(wait_reply) >= repl.min_replicas) return;
  repl.set_short_error(ec, server_label(s), "the renewal of " + what + " was applied", wait_reply,
                       "not counted: the lease's validity is not extended");
}

}  // namespace dlock::redis
