#pragma once
// The fencing base of a name and the restart delay, shared by memcached://'s lock and semaphore:
// a grant's fencing token is the base plus the CAS unique of the grant's item (README: Fencing).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "client_pool.hpp"

namespace dlock::memcached {

enum class fence_status { issued, server_restarted_recently, failed };

// The name's fencing base into `base`: the one read with the grant, or, when it is missing (a
// first use of the name, or a base lost with a restart, an eviction or a delete), one created
// so that this grant's token is fence_seed(server time), above every token the lost base gave
// (README: Fencing). A server younger than min_uptime_to_grant(ttl) (it restarted: holders from
// before may still be inside their validity) creates nothing and grants nothing, unless
// restart_delay=off.
// `keys.fence` is the base's key, on the server `keys.group` hashes to; `name` is for messages.
fence_status fence_base(memcached_st* m, const key_layout& keys, std::string_view name, bool restart_delay,
                        std::chrono::milliseconds ttl, std::uint64_t cas, std::optional<item> read, std::string& base,
                        std::error_code& ec);

}  // namespace dlock::memcached
