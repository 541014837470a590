#include "etcd_lock.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "capabilities.hpp"
#include "dlock/acquire_deadline.hpp"
#include "layout.hpp"
#include "primitives.hpp"
#include "requests.hpp"

namespace dlock::etcd {

namespace {

using clock = std::chrono::steady_clock;

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

  // A whole set in one Txn: it compares every member's folder empty (no holder, no waiter, no key
  // of the name's reader-writer lock or semaphore), then puts each member's key with a lease of its
  // own; or, when any folder has a key, takes nothing and reads the semaphores' keys, so that a
  // name in use as a semaphore is refused as a single mutex's try refuses it. The leases are
  // granted first (a lease without keys holds nothing anyone sees) and revoked when the set was
  // not taken. Every key of the set has the Txn's revision as its create revision: each name's
  // fencing token, rising as a single grant's does.
  std::vector<std::unique_ptr<spi::lease_state>> do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                    std::error_code& ec) noexcept override {
    std::vector<std::unique_ptr<spi::lease_state>> granted;
    std::vector<const etcd_lock*> members;
    for (auto* l : set) {
      const auto* m = dynamic_cast<const etcd_lock*>(l);
      if (m == nullptr || m->gw_ != gw_ || m->options().ttl != options().ttl) {
        ec = make_error_code(errc::not_supported);
        return granted;
      }
      members.push_back(m);
    }
    std::vector<std::int64_t> leases;
    try {
      const auto start = clock::now();
      std::int64_t seconds_granted = 0;
      for (std::size_t i = 0; i < members.size(); ++i) {
        const auto lease = grant(*gw_, seconds());
        leases.push_back(lease.id);
        seconds_granted = lease.seconds;
      }
      json compare = json::array(), puts = json::array(), semaphores = json::array();
      for (std::size_t i = 0; i < members.size(); ++i) {
        const auto& folder = members[i]->prefix_;
        compare.push_back({{"key", base64_encode(folder)},
                           {"range_end", base64_encode(prefix_end(folder))},
                           {"target", "CREATE"},
                           {"result", "EQUAL"},
                           {"create_revision", "0"}});
        puts.push_back({{"request_put",
                         {{"key", base64_encode(folder + hex_of(leases[i]))},
                          {"value", base64_encode(members[i]->owner())},
                          {"lease", std::to_string(leases[i])}}}});
        semaphores.push_back({{"request_range", semaphore_keys(folder)}});
      }
      const auto r = gw_->call("/v3/kv/txn", {{"compare", compare}, {"success", puts}, {"failure", semaphores}});
      if (!r.value("succeeded", false)) {
        for (const auto id : leases) revoke_quietly(*gw_, id);
        leases.clear();
        for (std::size_t i = 0; i < members.size(); ++i)  // one name, one lock (layout.hpp)
          refuse_if_semaphore(r, i, members[i]->name(), "a mutex");
        return granted;  // a member is held or waited for
      }
      const auto revision = int64_field(r["header"], "revision");
      const std::chrono::milliseconds ttl = std::chrono::seconds(seconds_granted);
      for (std::size_t i = 0; i < members.size(); ++i)
        granted.push_back(std::make_unique<etcd_lease>(gw_, std::string(members[i]->name()), ttl,
                                                       spi::lease_state::validity_after(start, ttl), leases[i],
                                                       members[i]->prefix_ + hex_of(leases[i]), revision));
      return granted;
    } catch (const std::exception& e) {
      // Unanswered, the Txn may still have run: revoking the leases deletes whatever it put.
      for (const auto id : leases) revoke_quietly(*gw_, id);
      granted.clear();
      const auto* dlock_error = dynamic_cast<const error*>(&e);
      if (dlock_error != nullptr)
        set_error(ec, dlock_error->code(), dlock_error->detail());
      else
        set_error(ec, errc::backend_error, std::string("etcd: ") + e.what());
      return granted;
    }
  }

 private:
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
                                   {{"request_range", first_created(prefix_)}},
                                   {{"request_range", semaphore_keys(prefix_)}}})},
          {"failure", json::array({{{"request_range", {{"key", base64_encode(key)}}}},
                                   {{"request_range", first_created(prefix_)}}})}};
      const auto r = gw_->call("/v3/kv/txn", txn);
      const bool created = r.value("succeeded", false);
      if (created) refuse_if_semaphore(r, 2, name(), "a mutex");  // one name, one lock (layout.hpp)
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
    : backend(etcd_caps, etcd_primitives, lock_scope::network, name_limits{}, defaults, u.redacted()),
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

std::unique_ptr<rw_lock> etcd_backend::do_make_rw_lock(std::string name, lock_options options) {
  auto folder = name_prefix(prefix_, name);
  return etcd::make_rw_lock(std::move(name), rw_caps(), std::move(options), gw_, std::move(folder));
}

std::unique_ptr<semaphore> etcd_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                           lock_options options) {
  auto folder = name_prefix(prefix_, name);
  return etcd::make_semaphore(std::move(name), max_count, semaphore_caps(), std::move(options), gw_, std::move(folder));
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

// One key of a name's folder, by the rules of its kind (layout.hpp).
struct contender {
  const json* kv = nullptr;
  bool holds = false;
  hold_kind kind = hold_kind::mutex;
  std::uint32_t count = 1;
  std::string owner;
};

// The keys of `folder` in create-revision order (`kvs`, as contenders() reads them): a mutex's or
// writer's key holds when it is the first, a reader's when only readers' keys came before it, a
// semaphore's when the permits up to it fit its max_count.
std::vector<contender> line_of(const std::string& folder, const json& kvs) {
  std::vector<contender> line;
  bool any_before = false, writer_before = false;
  std::uint64_t permits = 0;
  for (const auto& kv : kvs) {
    const auto key = base64_decode(kv.value("key", ""));
    const auto kind = kind_of_key(std::string_view(key).substr(std::min(folder.size(), key.size())));
    contender c{&kv, !any_before, hold_kind::mutex, 1, {}};
    if (kind == key_kind::semaphore) {
      const auto e = parse_semaphore_value(base64_decode(kv.value("value", "")));
      permits += e.permits;
      c = {&kv, e.max_count == 0 || permits <= e.max_count, hold_kind::permits, e.permits, e.owner};
    } else {
      c.owner = owner_of(kv);
      if (kind == key_kind::read) c.holds = !writer_before;
      if (kind == key_kind::read) c.kind = hold_kind::read;
      if (kind == key_kind::write) c.kind = hold_kind::write;
    }
    any_before = true;
    if (kind != key_kind::read) writer_before = true;
    line.push_back(std::move(c));
  }
  return line;
}

lock_holder holder_of(gateway& gw, const contender& c) {
  lock_holder h;
  h.owner = c.owner;
  h.kind = c.kind;
  h.count = c.count;
  h.fencing_token = static_cast<std::uint64_t>(int64_field(*c.kv, "create_revision"));
  if (const auto lease = int64_field(*c.kv, "lease"); lease != 0) {
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
  const auto folder = name_prefix(prefix_, name);
  const auto r = contenders(*gw_, folder);
  for (const auto& c : line_of(folder, range_kvs(r))) {
    if (c.holds)
      info.holders.push_back(holder_of(*gw_, c));
    else
      info.waiters.push_back({c.owner, c.kind});
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
    const auto slash = key.find('/', prefix_.size());  // a name dlock keeps as is has none
    if (slash == std::string::npos || slash == prefix_.size()) continue;
    if (kind_of_key(std::string_view(key).substr(slash + 1)) == key_kind::foreign) continue;
    auto name = key.substr(prefix_.size(), slash - prefix_.size());
    if (!name.starts_with(prefix) || name_prefix(prefix_, name) != key.substr(0, slash + 1)) continue;
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// Revokes each holder's lease rather than deleting its key: a Go holder (concurrency.Mutex, etcdctl
// lock) never looks at its key again once it holds, but its session's keep-alive sees the lease
// gone and closes Done(), the loss signal it acts on; a dlock holder's watchdog finds the lease gone
// as well. The key goes with the lease. dlock's leases carry one key each; a Go session's lease may
// carry others of that session, which are lost with it. A key put without a lease is deleted at its
// create revision.
std::vector<lock_holder> etcd_backend::do_force_release(const std::string& name) {
  const auto folder = name_prefix(prefix_, name);
  const auto r = contenders(*gw_, folder);
  std::vector<lock_holder> removed;
  for (const auto& c : line_of(folder, range_kvs(r))) {
    if (!c.holds) continue;
    auto holder = holder_of(*gw_, c);
    const auto& kv = *c.kv;
    if (const auto lease = int64_field(kv, "lease"); lease != 0) {
      try {
        gw_->call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
      } catch (const error& e) {
        if (e.detail().find("lease not found") != std::string::npos) continue;  // released meanwhile
        throw;
      }
      removed.push_back(std::move(holder));
      continue;
    }
    const json txn = {{"compare", json::array({{{"key", kv["key"]},
                                                {"target", "CREATE"},
                                                {"result", "EQUAL"},
                                                {"create_revision", std::to_string(*holder.fencing_token)}}})},
                      {"success", json::array({{{"request_delete_range", {{"key", kv["key"]}}}}})}};
    if (gw_->call("/v3/kv/txn", txn).value("succeeded", false)) removed.push_back(std::move(holder));
  }
  return removed;
}

}  // namespace dlock::etcd
