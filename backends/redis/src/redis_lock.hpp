#pragma once
// The mutex of redis:// (SET NX PX, redis-py layout), redis+reentrant:// (Redisson RLock layout)
// and redis+fair:// (Redisson RFairLock layout), and of their Sentinel and Cluster schemes.
#include <memory>
#include <string>

#include "backend_state.hpp"
#include "dlock/spi.hpp"

namespace dlock::redis {

// Throws dlock::error(invalid_name) on a cluster when the name's keys fall in different slots.
std::unique_ptr<distributed_lock> make_redis_lock(std::shared_ptr<backend_state> s, const std::string& name,
                                                  capabilities caps, lock_options options);

}  // namespace dlock::redis
