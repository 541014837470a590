// The fencing base of a name, shared by memcached://'s lock and semaphore (grant_fence.hpp).
#include "grant_fence.hpp"

namespace dlock::memcached {

fence_status fence_base(memcached_st* m, const key_layout& keys, std::string_view name, bool restart_delay,
                        std::chrono::milliseconds ttl, std::uint64_t cas, std::optional<item> read, std::string& base,
                        std::error_code& ec) {
  if (read) {
    base = std::move(read->value);
    return fence_status::issued;
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    memcached_return_t rc;
    const auto server = read_server_clock(m, keys, rc);
    if (!server) {
      set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name) + "' (stats of its server)");
      return fence_status::failed;
    }
    if (restart_delay && server->uptime < min_uptime_to_grant(ttl)) return fence_status::server_restarted_recently;
    const auto created = fence_base_for(server->unix_time, cas);
    // Never expires; of two creators one `add` wins, and both then use its base.
    rc = memcached_add_by_key(m, keys.group.data(), keys.group.size(), keys.fence.data(), keys.fence.size(),
                              created.data(), created.size(), 0, 0);
    if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED) {
      base = created;
      return fence_status::issued;
    }
    if (rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS) {
      set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name) + "' (add of the fencing base)");
      return fence_status::failed;
    }
    auto theirs = gets(m, keys, keys.fence, rc);
    if (theirs) {
      base = std::move(theirs->value);
      return fence_status::issued;
    }
    if (rc != MEMCACHED_NOTFOUND) {
      set_memcached_error(ec, m, rc, "fencing token of '" + std::string(name) + "' (gets of the fencing base)");
      return fence_status::failed;
    }
  }
  set_error(ec, errc::backend_error,
            "memcached: fencing token of '" + std::string(name) +
                "': its fencing base vanished three times in a row right after being created (is the server out "
                "of memory?)");
  return fence_status::failed;
}

}  // namespace dlock::memcached
