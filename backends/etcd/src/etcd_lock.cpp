#include "etcd_lock.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "capabilities.hpp"
#include "dlock/acquire_deadline.hpp"
#include "dlock/acquire_stop.hpp"

namespace dlock::etcd {

namespace {

using clock = std::chrono::steady_clock;

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
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

// A range over the name's keys, one key: the first (holder) or, below `below`, the last created.
json first_created(const std::string& prefix) {
  return {{"key", base64_encode(prefix)},
          {"range_end", base64_encode(prefix_end(prefix))},
          {"sort_order", "ASCEND"},
          {"sort_target", "CREATE"},
          {"limit", "1"}};
}
json last_created_below(const std::string& prefix, std::int64_t below) {
  return {{"key", base64_encode(prefix)},
          {"range_end", base64_encode(prefix_end(prefix))},
          {"sort_order", "DESCEND"},
          {"sort_target", "CREATE"},
          {"limit", "1"},
          {"max_create_revision", std::to_string(below - 1)}};
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

struct granted_lease {
  std::int64_t id = 0;
  std::int64_t seconds = 0;
};
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
  if (spi::stop_requested()) grace.emplace(clock::now());
  spi::unstoppable_scope unstoppable;
  try {
    gw.call("/v3/lease/revoke", {{"ID", std::to_string(id)}});
  } catch (...) {  // gone already, or unreachable: the lease then expires on its own within its TTL
  }
}

// The remaining TTL a keep-alive reports; 0 when the lease is gone.
std::int64_t keep_alive(gateway& gw, std::int64_t id) {
  const auto r = gw.call("/v3/lease/keepalive", {{"ID", std::to_string(id)}});
  return int64_field(r.contains("result") ? r["result"] : r, "TTL");
}

// Thrown inside an acquire when our lease expired while we waited: our place in the line is gone.
struct place_lost {};

class etcd_lock final : public distributed_lock {
 public:
  etcd_lock(std::string name, lock_options options, std::shared_ptr<gateway> gw, std::string prefix)
      : distributed_lock(std::move(name), etcd_caps, std::move(options)),
        gw_(std::move(gw)),
        prefix_(std::move(prefix)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return guarded(ec, [&] { return attempt(clock::time_point::min()); });
  }
  // In the deadline's scope each gateway request of the wait ends by the deadline plus
  // deadline_grace, and an outage is waited out here up to the deadline: the core's own last
  // attempt would run outside the scope, bounded only by command_timeout.
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return spi::wait_out_outages(deadline, options().poll, ec, [&](clock::time_point until, std::error_code& e) {
      return guarded(e, [&] {
        while (true) {
          try {
            return attempt(until);
          } catch (const place_lost&) {  // our lease expired while we waited: queue again with a new one
          }
        }
      });
    });
  }

 private:
  template <class F>
  std::unique_ptr<spi::lease_state> guarded(std::error_code& ec, F&& f) noexcept {
    try {
      return f();
    } catch (const error& e) {
      set_error(ec, e.code(), e.detail());
    } catch (const std::exception& e) {
      set_error(ec, errc::backend_error, std::string("etcd: ") + e.what());
    }
    return nullptr;
  }

  std::int64_t seconds() const noexcept { return ttl_seconds(options().ttl); }

  // One queue entry, kept until granted or until the deadline (min(): a try, which never waits).
  std::unique_ptr<spi::lease_state> attempt(clock::time_point deadline) {
    const auto start = clock::now();
    const auto lease = grant(*gw_, seconds());
    const std::chrono::milliseconds ttl = std::chrono::seconds(lease.seconds);
    const auto key = prefix_ + hex_of(lease.id);
    try {
      const json txn = {
          {"compare",
           json::array(
               {{{"key", base64_encode(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
          {"success", json::array({{{"request_put",
                                     {{"key", base64_encode(key)},
                                      {"value", base64_encode(options().owner)},
                                      {"lease", std::to_string(lease.id)}}}},
                                   {{"request_range", first_created(prefix_)}}})},
          {"failure", json::array({{{"request_range", {{"key", base64_encode(key)}}}},
                                   {{"request_range", first_created(prefix_)}}})}};
      const auto r = gw_->call("/v3/kv/txn", txn);
      const bool created = r.value("succeeded", false);
      const std::int64_t mine = created ? int64_field(r["header"], "revision") : first_create_revision(txn_range(r, 0));
      std::int64_t holder = first_create_revision(txn_range(r, 1));
      auto kept_alive_at = start;
      while (true) {
        if (holder == mine || holder == 0)
          return std::make_unique<etcd_lease>(
              gw_, std::string(name()), ttl, spi::lease_state::validity_after(kept_alive_at, ttl), lease.id, key, mine);
        if (clock::now() >= deadline) break;
        // Wait for the deletion of the key created last before ours, then read again.
        const auto before = gw_->call("/v3/kv/range", last_created_below(prefix_, mine));
        const auto& kvs = range_kvs(before);
        watch_end end = watch_end::deleted;
        if (!kvs.empty()) {
          const auto predecessor = base64_decode(kvs[0].value("key", ""));
          // From the revision after our read, where every deletion we wait for lies: a watch that
          // starts past the store's current revision is in sync at once and told at the delete;
          // one that starts at or below it waits for etcd's catch-up pass (every 100 ms).
          end = gw_->wait_deleted(predecessor, int64_field(before["header"], "revision") + 1, deadline, ttl / 3, [&] {
            const auto sent = clock::now();
            if (keep_alive(*gw_, lease.id) <= 0) throw place_lost{};
            kept_alive_at = sent;
          });
        }
        if (end == watch_end::stopped) break;
        // The re-check: we hold only if ours is the first key and it still exists.
        const json check = {{"success", json::array({{{"request_range", first_created(prefix_)}},
                                                     {{"request_range", {{"key", base64_encode(key)}}}}})}};
        const auto again = gw_->call("/v3/kv/txn", check);
        if (first_create_revision(txn_range(again, 1)) != mine) throw place_lost{};
        holder = first_create_revision(txn_range(again, 0));
        if (holder != mine && end == watch_end::deadline) break;
      }
    } catch (...) {
      revoke_quietly(*gw_, lease.id);
      throw;
    }
    revoke_quietly(*gw_, lease.id);  // held by another: our key goes with our lease
    return nullptr;
  }

  std::shared_ptr<gateway> gw_;
  std::string prefix_;
};

}  // namespace

std::int64_t ttl_seconds(std::chrono::milliseconds ttl) noexcept {
  return std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::seconds>(ttl).count());
}

std::string name_prefix(const std::string& uri_prefix, const std::string& name) {
  const auto key = spi::safe_key(
      name, 512, [](unsigned char c) { return c != '/'; }, "#");
  return uri_prefix + key + "/";
}

etcd_lease::etcd_lease(std::shared_ptr<gateway> gw, std::string name, std::chrono::milliseconds ttl,
                       clock::time_point valid_until, std::int64_t lease_id, std::string key, std::int64_t revision)
    : lease_state(std::move(name), ttl, valid_until),
      gw_(std::move(gw)),
      lease_id_(lease_id),
      key_(std::move(key)),
      revision_(revision) {}

std::int64_t lease_id_of(const spi::lease_state& state) noexcept {
  const auto* mine = dynamic_cast<const etcd_lease*>(&state);
  return mine ? mine->lease_id() : 0;
}

void etcd_lease::do_release(std::error_code& ec) noexcept {
  try {
    // Compare-and-delete: only our key at our create revision; the lease goes after it either way.
    const json txn = {{"compare", json::array({{{"key", base64_encode(key_)},
                                                {"target", "CREATE"},
                                                {"result", "EQUAL"},
                                                {"create_revision", std::to_string(revision_)}}})},
                      {"success", json::array({{{"request_delete_range", {{"key", base64_encode(key_)}}}}})}};
    const auto r = gw_->call("/v3/kv/txn", txn);
    revoke_quietly(*gw_, lease_id_);
    if (!r.value("succeeded", false))
      set_error(
          ec, errc::not_owner,
          "etcd: release of '" + name() + "': the lock is no longer ours (its lease expired or its key was deleted)");
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, std::string("etcd: ") + e.what());
  }
}

void etcd_lease::do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  try {
    if (ttl_seconds(ttl) > ttl_seconds(this->ttl())) {
      set_error(ec, errc::not_supported,
                "etcd: a keep-alive renews a lease to the TTL it was granted with (" +
                    std::to_string(ttl_seconds(this->ttl())) + "s), not longer");
      return;
    }
    if (keep_alive(*gw_, lease_id_) <= 0) {
      set_error(ec, errc::lock_lost, "etcd: the lease of '" + name() + "' expired or was revoked");
      return;
    }
    const auto r = gw_->call("/v3/kv/range", {{"key", base64_encode(key_)}});
    if (first_create_revision(r) != revision_)
      set_error(ec, errc::lock_lost, "etcd: the key of '" + name() + "' was deleted");
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, std::string("etcd: ") + e.what());
  }
}

namespace {

gateway_options options_of(const uri& u) {
  gateway_options o;
  for (const auto& h : u.hosts()) o.endpoints.push_back(host_port{h.host, h.port_or(2379)}.to_string());
  o.user = u.user();
  o.password = u.password().value_or("");
  if (auto d = u.get_duration("connect_timeout")) o.connect_timeout = *d;
  if (auto d = u.get_duration("command_timeout")) o.command_timeout = *d;
  return o;
}

std::string prefix_of(const uri& u) {
  std::string p = u.path();
  if (!p.empty() && p.back() != '/') p += '/';
  return p;
}

}  // namespace

etcd_backend::etcd_backend(const uri& u, const lock_options& defaults)
    : backend(etcd_caps, lock_scope::network, name_limits{}, defaults, u.redacted()),
      gw_(std::make_shared<gateway>(options_of(u))),
      prefix_(prefix_of(u)) {
  // Connects (and authenticates) now, so a wrong address or password fails open().
  gw_->call("/v3/kv/range",
            {{"key", base64_encode(prefix_.empty() ? std::string("dlock") : prefix_)}, {"count_only", true}});
}

std::unique_ptr<distributed_lock> etcd_backend::do_make_lock(std::string name, lock_options options) {
  auto prefix = name_prefix(prefix_, name);
  return std::make_unique<etcd_lock>(std::move(name), std::move(options), gw_, std::move(prefix));
}

namespace {

// Every key under `prefix`, in create-revision order: the first holds, the rest wait.
json contenders(gateway& gw, const std::string& prefix) {
  return gw.call("/v3/kv/range", {{"key", base64_encode(prefix)},
                                  {"range_end", base64_encode(prefix_end(prefix))},
                                  {"sort_order", "ASCEND"},
                                  {"sort_target", "CREATE"}});
}

// The owner id dlock puts as the key's value; Go's Mutex (etcdctl lock) puts none: then its lease,
// in hex as in its key.
std::string owner_of(const json& kv) {
  auto owner = base64_decode(kv.value("value", ""));
  if (owner.empty()) owner = hex_of(int64_field(kv, "lease"));
  return owner;
}

lock_holder holder_of(gateway& gw, const json& kv) {
  lock_holder h;
  h.owner = owner_of(kv);
  h.fencing_token = static_cast<std::uint64_t>(int64_field(kv, "create_revision"));
  if (const auto lease = int64_field(kv, "lease"); lease != 0) {
    const auto left = int64_field(gw.call("/v3/lease/timetolive", {{"ID", std::to_string(lease)}}), "TTL");
    if (left > 0) h.ttl_left = std::chrono::seconds(left);
  }
  return h;
}

}  // namespace

lock_info etcd_backend::do_inspect(const std::string& name) {
  lock_info info;
  info.name = name;
  info.waiters_known = true;
  const auto r = contenders(*gw_, name_prefix(prefix_, name));
  for (const auto& kv : range_kvs(r)) {
    if (info.holders.empty())
      info.holders.push_back(holder_of(*gw_, kv));
    else
      info.waiters.push_back({owner_of(kv), hold_kind::mutex});
  }
  info.held = !info.holders.empty();
  return info;
}

// The names of the keys under the URI's prefix (a key is held or queued, so its name is held). A
// name dlock stores hashed (one with a '/', starting with '#', or too long) keeps no trace of itself
// and is not listed, nor is a name with a '/' that another client (etcdctl lock a/b) put as is.
std::vector<std::string> etcd_backend::do_list(const std::string& prefix) {
  auto from = prefix_ + prefix;
  json request = {{"range_end", base64_encode(prefix_end(from))}, {"keys_only", true}};
  if (from.empty()) from.assign(1, '\0');  // every key: range ["\0", "\0")
  request["key"] = base64_encode(from);
  const auto r = gw_->call("/v3/kv/range", request);
  std::vector<std::string> names;
  for (const auto& kv : range_kvs(r)) {
    const auto key = base64_decode(kv.value("key", ""));
    if (!key.starts_with(prefix_)) continue;
    const auto slash = key.rfind('/');
    if (slash == std::string::npos || slash < prefix_.size()) continue;
    auto name = key.substr(prefix_.size(), slash - prefix_.size());
    if (name.empty() || !name.starts_with(prefix) || name_prefix(prefix_, name) != key.substr(0, slash + 1)) continue;
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// Revokes the holder's lease rather than deleting its key: a Go holder (concurrency.Mutex, etcdctl
// lock) never looks at its key again once it holds, but its session's keep-alive sees the lease
// gone and closes Done(), the loss signal it acts on; a dlock holder's watchdog finds the lease gone
// as well. The key goes with the lease. dlock's leases carry one key each; a Go session's lease may
// carry others of that session, which are lost with it. A key put without a lease is deleted at its
// create revision.
std::vector<lock_holder> etcd_backend::do_force_release(const std::string& name) {
  const auto r = contenders(*gw_, name_prefix(prefix_, name));
  const auto& kvs = range_kvs(r);
  if (kvs.empty()) return {};
  const auto& kv = kvs[0];
  auto holder = holder_of(*gw_, kv);
  if (const auto lease = int64_field(kv, "lease"); lease != 0) {
    try {
      gw_->call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
    } catch (const error& e) {
      if (e.detail().find("lease not found") != std::string::npos) return {};  // released meanwhile
      throw;
    }
    return {std::move(holder)};
  }
  const json txn = {{"compare", json::array({{{"key", kv["key"]},
                                              {"target", "CREATE"},
                                              {"result", "EQUAL"},
                                              {"create_revision", std::to_string(*holder.fencing_token)}}})},
                    {"success", json::array({{{"request_delete_range", {{"key", kv["key"]}}}}})}};
  if (!gw_->call("/v3/kv/txn", txn).value("succeeded", false)) return {};  // released meanwhile
  return {std::move(holder)};
}

}  // namespace dlock::etcd
