#include "requests.hpp"

#include <cstdio>
#include <optional>

#include "dlock/acquire_deadline.hpp"
#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::etcd {

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string hex_of(std::int64_t id) {
  char text[32];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(id));
  return text;
}

json first_created(const std::string& prefix) {
  return {{"key", base64_encode(prefix)},
          {"range_end", base64_encode(prefix_end(prefix))},
          {"sort_order", "ASCEND"},
          {"sort_target", "CREATE"},
          {"limit", "1"}};
}

json last_created_below(const std::string& begin, const std::string& end, std::int64_t below) {
  return {{"key", base64_encode(begin)},
          {"range_end", base64_encode(end)},
          {"sort_order", "DESCEND"},
          {"sort_target", "CREATE"},
          {"limit", "1"},
          {"max_create_revision", std::to_string(below - 1)}};
}

json last_created_below(const std::string& prefix, std::int64_t below) {
  return last_created_below(prefix, prefix_end(prefix), below);
}

const json& range_kvs(const json& response) {
  static const json none = json::array();
  return response.is_object() && response.contains("kvs") ? response["kvs"] : none;
}

const json& txn_range(const json& txn, std::size_t i) {
  static const json none = json::object();
  if (!txn.contains("responses") || txn["responses"].size() <= i) return none;
  const auto& r = txn["responses"][i];
  return r.contains("response_range") ? r["response_range"] : none;
}

std::int64_t first_create_revision(const json& range) {
  const auto& kvs = range_kvs(range);
  return kvs.empty() ? 0 : int64_field(kvs[0], "create_revision");
}

granted_lease grant(gateway& gw, std::int64_t seconds) {
  const auto r = gw.call("/v3/lease/grant", {{"TTL", std::to_string(seconds)}});
  granted_lease g{int64_field(r, "ID"), int64_field(r, "TTL")};
  if (g.id == 0 || g.seconds <= 0)
    throw error(errc::backend_error, "etcd: /v3/lease/grant: " + (r.contains("error") ? r["error"].dump() : r.dump()));
  return g;
}

void revoke_quietly(gateway& gw, std::int64_t id) noexcept {
  // A withdrawal after a stop request runs to its end, but bounded by deadline_grace: the stop
  // should end the acquire soon even when the server went silent, and a lease whose revoke did not
  // get through still expires within its TTL.
  std::optional<spi::deadline_scope> grace;
  if (spi::stop_requested()) grace.emplace(std::chrono::steady_clock::now());
  spi::unstoppable_scope unstoppable;
  try {
    gw.call("/v3/lease/revoke", {{"ID", std::to_string(id)}});
  } catch (...) {  // gone already, or unreachable: the lease then expires on its own within its TTL
  }
}

std::int64_t keep_alive(gateway& gw, std::int64_t id) {
  const auto r = gw.call("/v3/lease/keepalive", {{"ID", std::to_string(id)}});
  return int64_field(r.contains("result") ? r["result"] : r, "TTL");
}

}  // namespace dlock::etcd
