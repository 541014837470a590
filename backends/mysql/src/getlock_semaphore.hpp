#pragma once
// mysql+getlock's counting semaphore: N GET_LOCK slots per name. A lease holds its permits as
// GET_LOCK locks of distinct slots on a connection of its own, so they are freed with it when the
// holder dies. There is no reader-writer lock here: GET_LOCK has no shared mode (README).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/spi.hpp"
#include "dlock_sql/connection.hpp"
#include "getlock.hpp"

namespace dlock::mysql {

// The GET_LOCK name of slot `slot` of semaphore `name`: '%' + the first 63 hex digits of
// SHA-256(decimal slot + '\0' + name). 64 characters; it starts with '%', which neither a plain
// lock key nor a hashed one ('#') does, so a slot never shares a key with a mutex.
std::string semaphore_slot_key(std::string_view name, std::uint32_t slot);

// One name, one lock: before its first slot, a semaphore records its name (the mutex's GET_LOCK
// key, getlock_key.hpp) and max_count in the semaphores' table, which the mutex reads once it
// holds the name; each slot it takes is followed, in the same statement, by IS_USED_LOCK of the
// name. Of a mutex and a semaphore racing for one name, at least one sees the other and gives
// its lock back (errc::name_conflict): never both granted.
std::unique_ptr<semaphore> make_getlock_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps,
                                                  lock_options options,
                                                  std::shared_ptr<const getlock_backend::shared> shared);

// How many of the first `max_count` slots of `name` are held by any connection (IS_USED_LOCK, a
// few hundred per statement); nullopt with ec set when a statement failed.
std::optional<std::uint32_t> semaphore_permits_held(dlock::sql::connection& c, std::string_view name,
                                                    std::uint32_t max_count, std::error_code& ec) noexcept;

}  // namespace dlock::mysql
