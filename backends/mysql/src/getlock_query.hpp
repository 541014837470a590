#pragma once
// The statements of mysql+getlock (the mutex, getlock.cpp, and the semaphore,
// getlock_semaphore.cpp) are SELECTs of one lock function: GET_LOCK, RELEASE_LOCK, IS_USED_LOCK.
// Both read their one integer the same way.
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "dlock_sql/connection.hpp"

namespace dlock::mysql {

inline constexpr const char* release_lock_sql = "SELECT RELEASE_LOCK(?)";

// The single integer a SELECT of one function returns; nullopt for SQL NULL.
std::optional<long long> scalar(const dlock::sql::result& out);

// Runs one statement with `params` and reads its integer into `value`; false with ec set (naming
// `what`) when the statement failed.
bool query_scalar(dlock::sql::connection& c, const std::string& text, std::span<const dlock::sql::param> params,
                  std::optional<long long>& value, std::error_code& ec, const std::string& what) noexcept;

}  // namespace dlock::mysql
