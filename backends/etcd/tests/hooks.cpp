// Conformance hooks for etcd://: the saboteur revokes the holder's lease from outside (its key goes with it, as
// when the lease expires); the probe lists the keys under the name's prefix with raw gateway requests.
#include <stdexcept>
#include <string>

#include "../src/etcd_lock.hpp"
#include "../src/gateway.hpp"
#include "dlock/uri.hpp"
#include "dlock_test/hooks.hpp"

namespace {

std::unique_ptr<dlock::etcd::gateway> raw_client(const dlock::uri& u) {
  dlock::etcd::gateway_options o;
  for (const auto& h : u.hosts()) o.endpoints.push_back(dlock::host_port{h.host, h.port_or(2379)}.to_string());
  o.user = u.user();
  o.password = u.password().value_or("");
  return std::make_unique<dlock::etcd::gateway>(o);
}

std::string uri_prefix(const dlock::uri& u) {
  std::string p = u.path();
  if (!p.empty() && p.back() != '/') p += '/';
  return p;
}

void break_lock(const std::string& text, const dlock::lease& held) {
  const auto id = dlock::etcd::lease_id_of(*held.state());
  if (id == 0) throw std::runtime_error("etcd hooks: not an etcd lease");
  raw_client(dlock::uri::parse(text))->call("/v3/lease/revoke", {{"ID", std::to_string(id)}});
}

bool is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  auto prefix = dlock::etcd::name_prefix(uri_prefix(u), std::string(name));
  auto end = prefix;
  end.back() = static_cast<char>(end.back() + 1);  // prefix ends in '/'
  const auto r = raw_client(u)->call("/v3/kv/range", {{"key", dlock::etcd::base64_encode(prefix)},
                                                      {"range_end", dlock::etcd::base64_encode(end)},
                                                      {"count_only", true}});
  return dlock::etcd::int64_field(r, "count") > 0;
}

}  // namespace

DLOCK_TEST_HOOKS("etcd", {.break_lock = break_lock,
                          .is_held_on_server = is_held,
                          .inspection = {.inspect = true, .list = true, .force_release = true}});
