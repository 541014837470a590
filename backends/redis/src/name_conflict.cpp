#include "name_conflict.hpp"

#include <string>

#include "dlock/error.hpp"

namespace dlock::redis {

bool is_name_conflict(const redisReply* r) noexcept {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
         r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == -3 &&
         r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2]->type == REDIS_REPLY_STRING;
}

void set_name_conflict(std::error_code& ec, std::string_view name, std::string_view key, const redisReply& r,
                       std::string_view wanted) {
  const std::string in_use_as(r.element[2]->str, r.element[2]->len);
  const auto permits = r.element[1]->integer;
  std::string what = "redis: '" + std::string(name) + "' is in use as a " + in_use_as;
  if (in_use_as == "semaphore") {
    // Redisson's layout keeps a semaphore's count key after its last permit is returned; taking
    // the name for a lock would mean deleting it under a Redisson client that relies on it.
    what += permits > 0
                ? " (" + std::to_string(permits) + (permits == 1 ? " permit" : " permits") + " held on the server)"
                : " (no permit is held now, but its count key '" + std::string(key) +
                      "' stays after the last permit is returned, as Redisson keeps it; deleting that key "
                      "frees the name for a lock)";
  } else {
    what += " (held now)";
  }
  set_error(ec, errc::name_conflict,
            what + "; " + std::string(wanted) + " of the same name cannot be taken: use another name");
}

}  // namespace dlock::redis
