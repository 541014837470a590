#pragma once
// How inspect, list and break print what they found: one line per holder or waiter for people,
// or one JSON document (--json) for scripts.
#include <string>
#include <string_view>
#include <vector>

#include "dlock/inspection.hpp"
#include "dlock_compare/text_table.hpp"

namespace dlock::cli {

// A JSON string literal, written as the compare reports write theirs.
using compare::json_string;
std::string holder_json(const lock_holder& h);
std::string waiter_json(const lock_waiter& w);
// "owner=<id> kind=mutex token=7 ttl-left=2500ms since=2026-11-28T00:12:00Z" (fields it has).
std::string holder_line(const lock_holder& h);
std::string waiter_line(const lock_waiter& w);

}  // namespace dlock::cli
