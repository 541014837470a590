#pragma once
// mysql+getlock's counting semaphore: N GET_LOCK slots per name. A lease holds its permits as
// GET_LOCK locks of distinct slots on a connection of its own, so they are freed with it when the
// holder dies. There is no reader-writer lock here: GET_LOCK has no shared mode (README).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/spi.hpp"
namespace dlock::sql {
class pool;
}

namespace dlock::mysql {

// The GET_LOCK name of slot `slot` of semaphore `name`: '%' + the first 63 hex digits of
// SHA-256(decimal slot + '\0' + name). 64 characters; it starts with '%', which neither a plain
// lock key nor a hashed one ('#') does, so a slot never shares a key with a mutex.
std::string semaphore_slot_key(std::string_view name, std::uint32_t slot);

// `get_lock_sql` binds (key, seconds) and returns the fencing token (NEXTVAL) when granted, 0 when not.
std::unique_ptr<semaphore> make_getlock_semaphore(std::string name, std::uint32_t max_count, capabilities caps,
                                                  lock_options options, std::shared_ptr<dlock::sql::pool> connections,
                                                  std::string get_lock_sql);

}  // namespace dlock::mysql
