#include "replication.hpp"

#include "dlock/error.hpp"
#include "dlock/uri.hpp"

namespace dlock::redis {

std::vector<std::string_view> replication::wait_command() const { return {"WAIT", n_text_, timeout_text_}; }

long long replication::confirmed(const redisReply* r) noexcept {
  return r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

void replication::set_short_error(std::error_code& ec, const std::string& label, const std::string& what,
                                  const redisReply* r, std::string_view consequence) const {
  const auto got = confirmed(r);
  set_error(ec, errc::backend_unavailable,
            "redis " + label + ": " + what + " but " +
                (got < 0 ? "WAIT failed (" + std::string(error_text(r)) + ")"
                         : "only " + std::to_string(got) + " of the " + std::to_string(min_replicas) +
                               " replicas asked for (min_replicas) confirmed it within replica_timeout " +
                               std::to_string(timeout.count()) + "ms") +
                "; " + std::string(consequence));
}

replication parse_replication(const uri& u, std::chrono::milliseconds command_timeout) {
  replication r;
  if (auto v = u.get_int("min_replicas", 0, 64)) r.min_replicas = static_cast<int>(*v);
  if (auto v = u.get_duration("replica_timeout")) {
    // WAIT 0 would wait forever; WAIT's reply must come within command_timeout, or the connection
    // is taken for broken while the server is only waiting for replicas.
    if (v->count() < 1 || *v >= command_timeout)
      throw error(errc::invalid_uri, "redis: " + u.redacted() + ": replica_timeout must be at least 1ms and below " +
                                         "command_timeout (" + std::to_string(command_timeout.count()) + "ms)");
    r.timeout = *v;
  }
  if (r.timeout >= command_timeout)
    throw error(errc::invalid_uri, "redis: " + u.redacted() + ": replica_timeout (" +
                                       std::to_string(r.timeout.count()) + "ms) must be below command_timeout (" +
                                       std::to_string(command_timeout.count()) + "ms)");
  r.n_text_ = std::to_string(r.min_replicas);
  r.timeout_text_ = std::to_string(r.timeout.count());
  return r;
}

}  // namespace dlock::redis
