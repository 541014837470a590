// memcached_renewals: the watchdog's renewal of many leases in two round trips per server.
#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memcached_lease.hpp"

namespace dlock::memcached {

namespace {

// `gets` of `keys` on the server `group` hashes to: each found key's value and CAS unique.
std::unordered_map<std::string_view, item> gets_many(memcached_st* m, std::string_view group,
                                                     const std::vector<const char*>& keys,
                                                     const std::vector<size_t>& lengths, memcached_return_t& rc) {
  std::unordered_map<std::string_view, item> found;
  rc = memcached_mget_by_key(m, group.data(), group.size(), keys.data(), lengths.data(), keys.size());
  if (memcached_failed(rc)) return found;
  // Keyed by views of the caller's key storage, which outlives the map (the result's key does not).
  std::unordered_map<std::string_view, std::string_view> ours;
  for (std::size_t i = 0; i < keys.size(); ++i)
    ours.emplace(std::string_view(keys[i], lengths[i]), std::string_view(keys[i], lengths[i]));
  memcached_result_st* r = nullptr;
  memcached_return_t frc = MEMCACHED_SUCCESS;
  while ((r = memcached_fetch_result(m, nullptr, &frc)) != nullptr) {
    const std::string_view key(memcached_result_key_value(r), memcached_result_key_length(r));
    if (const auto it = ours.find(key); it != ours.end())
      found.insert_or_assign(it->second, item{std::string(memcached_result_value(r), memcached_result_length(r)),
                                              memcached_result_cas(r)});
    memcached_result_free(r);
  }
  rc = (frc == MEMCACHED_END || frc == MEMCACHED_SUCCESS || frc == MEMCACHED_NOTFOUND) ? MEMCACHED_SUCCESS : frc;
  return found;
}

std::string not_ours(const memcached_lease& l) {
  return "memcached: renew of '" + l.name() +
         "': the lock is no longer ours (expired, evicted, deleted or replaced, and maybe taken by another owner)";
}

}  // namespace

ascii_pipeline& memcached_renewals::pipeline_to(const memcached_instance_st* server) {
  const std::string host = memcached_server_name(server);
  const auto port = memcached_server_port(server);
  auto& p = pipelines_[host + ":" + std::to_string(port)];
  if (!p) p = std::make_unique<ascii_pipeline>(host, port, connect_timeout_, io_timeout_);
  return *p;
}

void memcached_renewals::renew_all(std::span<spi::lease_state* const> leases,
                                   std::span<std::error_code> outcomes) noexcept {
  try {
    std::lock_guard guard(mutex_);  // the pipelines
    auto h = pool_->borrow();
    memcached_st* m = h.get();
    // The leases by the server their name hashes to: one `gets` per server (two when some leases
    // do not know their item's CAS unique).
    std::map<const memcached_instance_st*, std::vector<std::size_t>> by_server;
    for (std::size_t i = 0; i < leases.size(); ++i) {
      const auto& l = static_cast<const memcached_lease&>(*leases[i]);
      memcached_return_t rc = MEMCACHED_SUCCESS;
      const auto* server = memcached_server_by_key(m, l.keys_.group.data(), l.keys_.group.size(), &rc);
      if (!server || memcached_failed(rc)) {
        set_memcached_error(outcomes[i], m, memcached_failed(rc) ? rc : MEMCACHED_NO_SERVERS,
                            "renew of '" + l.name() + "'");
        continue;
      }
      by_server[server].push_back(i);
    }
    for (const auto& [server, members] : by_server) {
      const auto& group = static_cast<const memcached_lease&>(*leases[members.front()]).keys_.group;
      const auto fail_all = [&](const std::vector<std::size_t>& which, memcached_return_t rc, std::string_view step) {
        for (const auto i : which) {
          const auto& l = static_cast<const memcached_lease&>(*leases[i]);
          set_memcached_error(outcomes[i], m, rc, "renew of '" + l.name() + "' (" + std::string(step) + ")");
        }
      };
      // Each item's CAS unique: the one the lease last saw (its grant's, or the last batch's), or
      // for a lease that does not know it (renewed or released alone since), a `gets`.
      std::vector<std::uint64_t> cas(members.size(), 0);
      std::vector<const char*> keys;
      std::vector<size_t> lengths;
      for (std::size_t s = 0; s < members.size(); ++s) {
        const auto& l = static_cast<const memcached_lease&>(*leases[members[s]]);
        cas[s] = l.known_cas_.load();
        if (cas[s] != 0) continue;
        keys.push_back(l.keys_.lock.data());
        lengths.push_back(l.keys_.lock.size());
      }
      memcached_return_t rc = MEMCACHED_SUCCESS;
      if (!keys.empty()) {
        const auto before = gets_many(m, group, keys, lengths, rc);
        if (rc != MEMCACHED_SUCCESS) {
          fail_all(members, rc, "gets");
          continue;
        }
        for (std::size_t s = 0; s < members.size(); ++s) {
          if (cas[s] != 0) continue;
          const auto& l = static_cast<const memcached_lease&>(*leases[members[s]]);
          const auto it = before.find(l.keys_.lock);
          if (it == before.end() || it->second.value != l.token_)
            set_error(outcomes[members[s]], errc::not_owner, not_ours(l));
          else
            cas[s] = it->second.cas;
        }
      }
      // A `cas ... noreply` store of each item still ours with its lease's new expiry, then `gets`
      // of those keys, written in one go on the server's pipeline connection.
      std::vector<std::size_t> stored;
      std::vector<std::uint64_t> stored_cas;
      std::string request;
      for (std::size_t s = 0; s < members.size(); ++s) {
        const auto i = members[s];
        if (outcomes[i]) continue;  // already known not to be ours
        const auto& l = static_cast<const memcached_lease&>(*leases[i]);
        // Applied only to the very item of that CAS unique: ours (a replaced item has another).
        request += "cas " + l.keys_.lock + " 0 " + std::to_string(exptime_for(l.ttl())) + " " +
                   std::to_string(l.token_.size()) + " " + std::to_string(cas[s]) + " noreply\r\n" + l.token_ + "\r\n";
        stored.push_back(i);
        stored_cas.push_back(cas[s]);
      }
      if (stored.empty()) continue;
      constexpr std::size_t keys_per_gets = 100;  // short command lines
      int gets_lines = 0;
      for (std::size_t from = 0; from < stored.size(); from += keys_per_gets, ++gets_lines) {
        request += "gets";
        for (std::size_t s = from; s < std::min(stored.size(), from + keys_per_gets); ++s)
          request += " " + static_cast<const memcached_lease&>(*leases[stored[s]]).keys_.lock;
        request += "\r\n";
      }
      std::string why;
      const auto after = pipeline_to(server).exchange(request, gets_lines, why);
      if (!after) {
        for (const auto i : stored)
          set_error(outcomes[i], errc::backend_unavailable,
                    "memcached: renew of '" + leases[i]->name() + "' (pipelined cas and gets): " + why);
        continue;
      }
      // Which stores were applied: the item carries the token under a new CAS unique (only this
      // lease knows its token, so only its own store can have put it there since the CAS unique
      // it stored with). Gone or another token: no longer ours, as a single renewal would say.
      for (std::size_t s = 0; s < stored.size(); ++s) {
        auto& l = static_cast<memcached_lease&>(*leases[stored[s]]);
        auto& ec = outcomes[stored[s]];
        const auto it = after->find(l.keys_.lock);
        if (it == after->end() || it->second.value != l.token_) {
          set_error(ec, errc::not_owner, not_ours(l));
        } else if (it->second.cas == stored_cas[s]) {
          // Still the item of that CAS unique: the store was not applied, and nothing says why.
          set_error(ec, errc::backend_error, "memcached: renew of '" + l.name() + "': the cas store was not applied");
        } else {
          l.known_cas_.store(it->second.cas);
        }
      }
    }
  } catch (const std::exception& e) {
    for (auto& ec : outcomes)
      if (!ec) set_error(ec, errc::backend_unavailable, std::string("memcached: renewing: ") + e.what());
  }
}

}  // namespace dlock::memcached
