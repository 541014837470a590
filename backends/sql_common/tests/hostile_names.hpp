#pragma once
// Lock names that break SQL built by pasting, LIKE patterns, text columns, case-insensitive
// collations and naive length checks. Shared by the PostgreSQL and MySQL backend tests: every
// name must be acquirable, held independently of every other one, and released.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::sql::testing {

// `max_length`: the backend's name_limits.max_length (one name of exactly that length is added).
inline std::vector<std::string> hostile_names(std::size_t max_length) {
  using namespace std::string_literals;
  std::vector<std::string> names{
      "plain",
      "Plain",  // differs only in case from "plain": must not collide
      "PLAIN",
      "it's",           // quote
      "\"double\"",     // identifier quote
      "`back`",         // MySQL identifier quote
      "back\\slash\\",  // backslash, trailing too
      "100%",           // LIKE wildcard
      "under_score",    // LIKE wildcard
      "%",
      "_",
      "semi; DROP TABLE x; --",  // classic injection
      "nul\0byte"s,              // NUL inside
      "\0"s,                     // NUL only
      "trailing space ",         // PAD SPACE collations compare "a" = "a "
      "trailing space",
      "caf\xc3\xa9",               // UTF-8 e-acute
      "cafe\xcc\x81",              // the same, decomposed: a different byte string
      "\xff\xfe invalid utf-8",    // not UTF-8 at all
      "\xe6\x97\xa5\xe6\x9c\xac",  // CJK
      "new\nline\ttab",
      std::string(max_length, 'x'),
  };
  std::string longest_mixed(max_length, 'y');
  longest_mixed.back() = 'Y';
  names.push_back(longest_mixed);
  return names;
}

// Takes a lock of each of `names` on `b` (a name that collides with one taken before is refused:
// a fatal failure), expects a second lock of each name to be refused while all are held, and
// releases them. Call it in ASSERT_NO_FATAL_FAILURE to stop the test at a collision.
inline void expect_names_held_apart(dlock::backend& b, const std::vector<std::string>& names) {
  std::vector<dlock::lease> held;
  for (const auto& n : names) {
    held.push_back(b.make_lock(n)->try_acquire());
    ASSERT_TRUE(held.back()) << "distinct name collided with another held one: index " << held.size() - 1;
  }
  for (const auto& n : names) EXPECT_FALSE(b.make_lock(n)->try_acquire()) << "same name must exclude";
  for (auto& l : held) l.release();
}

}  // namespace dlock::sql::testing
