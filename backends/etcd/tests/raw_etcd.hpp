#pragma once
// For the etcd tests: the server (DLOCK_ETCD_URI; a test FAILS when it is unset) and a gateway of
// its own that reads the keys as they are, not through the code under test.
#include <cstdint>
#include <cstdio>
#include <string>

#include "dlock/uri.hpp"
#include "dlock_test/support.hpp"
#include "gateway.hpp"

namespace dlock::etcd::testing {

inline std::string uri() { return dlock::testing::server_uri("DLOCK_ETCD_URI"); }

inline gateway raw() {
  gateway_options o;
  for (const auto& h : dlock::uri::parse(uri()).hosts()) o.endpoints.push_back(h.to_string());
  return gateway(o);
}

// The keys under `prefix`, in create-revision order.
inline json keys_under(gateway& gw, const std::string& prefix) {
  auto end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  const auto r = gw.call("/v3/kv/range", {{"key", base64_encode(prefix)},
                                          {"range_end", base64_encode(end)},
                                          {"sort_order", "ASCEND"},
                                          {"sort_target", "CREATE"}});
  return r.contains("kvs") ? r["kvs"] : json::array();
}

// The keys of the mutex `name` ("<name>/..."), in create-revision order.
inline json keys_of(gateway& gw, const std::string& name) { return keys_under(gw, name + "/"); }

inline std::string key_of(const json& kv) { return base64_decode(kv["key"].get<std::string>()); }

// A lease id as the keys spell it: lower-case hex.
inline std::string hex(std::int64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace dlock::etcd::testing
