#pragma once
// One name, one lock: what an acquire script's answer says when the name is in use as another
// kind of primitive (a mutex, a reader-writer lock, a semaphore), and the error that says so.
#include <hiredis/hiredis.h>

#include <string_view>
#include <system_error>

namespace dlock::redis {

// The name is in use as another kind of primitive: an acquire script answered {-3, permits held,
// what the name is} (scripts.hpp). Sets errc::name_conflict with a message saying what the name is
// in use as (the words "in use as a semaphore", "a mutex", "a reader-writer lock") and that
// `wanted` ("a mutex", "a reader-writer lock", "a semaphore") of the same name cannot be taken;
// `key` is the name's raw key (a semaphore's count key stays after its last permit is returned).
void set_name_conflict(std::error_code& ec, std::string_view name, std::string_view key, const redisReply& r,
                       std::string_view wanted);
// Whether an acquire script answered so.
bool is_name_conflict(const redisReply* r) noexcept;

}  // namespace dlock::redis
