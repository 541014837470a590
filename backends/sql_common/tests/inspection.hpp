#pragma once
// backend::inspect, list and force_release on the SQL table schemes, shared by the PostgreSQL
// and MySQL backend tests (the conformance suite checks that they work at all; these check what
// they report). Each takes a backend opened on a table of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"

namespace dlock::sql::testing {

// list(prefix) gives exactly the held names that start with the prefix, byte for byte: '%' and
// '_' in the prefix match only themselves (a LIKE pattern would also match "50xyz/1"), a prefix
// ending in 0xff bytes keeps its range, and released names (and, where grants expire, expired
// ones, whose rows stay until swept) are not listed.
inline void expect_list_is_exact(dlock::backend& b, bool grants_expire) {
  using namespace std::chrono_literals;
  const auto base = dlock::testing::unique_name("list") + "/";
  const std::string prefix = base + "50%_";
  const std::vector<std::string> inside{prefix + "1", prefix + "\xff", prefix + "\xff\x01", prefix};
  const std::vector<std::string> outside{base + "50xy1", base + "50%x1", base + "50%", base + "5"};
  std::vector<dlock::lease> held;
  for (const auto& n : inside) held.push_back(b.make_lock(n)->try_acquire());
  for (const auto& n : outside) held.push_back(b.make_lock(n)->try_acquire());
  for (const auto& l : held) ASSERT_TRUE(l);

  auto expected = inside;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(b.list(prefix), expected);
  EXPECT_EQ(b.list(prefix + "\xff"), (std::vector<std::string>{prefix + "\xff", prefix + "\xff\x01"}));
  EXPECT_EQ(b.list(base).size(), inside.size() + outside.size());

  held[0].release();  // prefix + "1"
  expected.erase(std::find(expected.begin(), expected.end(), inside[0]));
  EXPECT_EQ(b.list(prefix), expected) << "a released name is still listed";

  if (grants_expire) {
    auto opts = b.default_options();
    opts.ttl = 300ms;
    opts.watchdog = false;
    const auto expiring = prefix + "expiring";
    auto short_lived = b.make_lock(expiring, opts)->try_acquire();
    ASSERT_TRUE(short_lived);
    EXPECT_TRUE(b.inspect(expiring).held);
    ASSERT_TRUE(dlock::testing::eventually([&] { return !b.inspect(expiring).held; }));
    EXPECT_EQ(b.list(prefix), expected) << "an expired grant (its row still there) is listed";
  }
  for (auto& l : held) l.release();
  EXPECT_TRUE(b.list(base).empty());
}

// inspect reports the holder's owner id, its fencing token and a ttl left within the ttl; a free
// name is not held.
inline void expect_inspect_reports_the_row(dlock::backend& b) {
  using namespace std::chrono_literals;
  const auto name = dlock::testing::unique_name("inspect");
  EXPECT_FALSE(b.inspect(name).held);
  auto opts = b.default_options();
  opts.ttl = 20s;
  opts.owner = "operator-visible:owner 'id'";
  auto lock = b.make_lock(name, opts);
  auto held = lock->try_acquire();
  ASSERT_TRUE(held);
  const auto info = b.inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, opts.owner);
  EXPECT_EQ(info.holders[0].fencing_token, held.fencing_token());
  ASSERT_TRUE(info.holders[0].ttl_left);
  EXPECT_GT(*info.holders[0].ttl_left, 0ms);
  EXPECT_LE(*info.holders[0].ttl_left, opts.ttl);
  held.release();
  EXPECT_FALSE(b.inspect(name).held);
}

// force_release ends the grant: it returns the holder, the name is free at once, and the holder's
// release says not_owner (its watchdog is off, so nothing else can have told it). With
// `fence_survives`, the next holder's token is still higher than the broken one's.
inline void expect_force_release_says_not_owner(dlock::backend& b) {
  using namespace std::chrono_literals;
  const auto name = dlock::testing::unique_name("break");
  auto opts = b.default_options();
  opts.ttl = 20s;
  opts.watchdog = false;
  auto stuck = b.make_lock(name, opts);
  auto held = stuck->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_TRUE(b.force_release(dlock::testing::unique_name("break-free")).empty()) << "a free name has no holder";
  const auto removed = b.force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, stuck->owner());
  EXPECT_EQ(removed[0].fencing_token, held.fencing_token());
  EXPECT_FALSE(b.inspect(name).held);
  auto next = b.make_lock(name)->try_acquire();
  ASSERT_TRUE(next) << "the name was not free after force_release";
  ASSERT_TRUE(next.fencing_token() && held.fencing_token());
  EXPECT_GT(*next.fencing_token(), *held.fencing_token());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(b.inspect(name).held) << "the broken holder's release freed the next holder's grant";
  next.release();
}

// FOR UPDATE: inspect names the session whose transaction holds the row (`session_label`: "pid "
// or "connection "), and force_release ends that session: the name is free, the holder is told.
inline void expect_force_release_ends_the_session(dlock::backend& b, const std::string& session_label) {
  using namespace std::chrono_literals;
  const auto name = dlock::testing::unique_name("break-session");
  auto opts = b.default_options();
  opts.ttl = 20s;
  auto stuck = b.make_lock(name, opts);
  auto held = stuck->try_acquire();
  ASSERT_TRUE(held);
  auto other = b.make_lock(dlock::testing::unique_name("other-session"))->try_acquire();
  ASSERT_TRUE(other);
  const auto info = b.inspect(name);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_TRUE(info.holders[0].owner.starts_with(session_label)) << info.holders[0].owner;
  const auto other_info = b.inspect(other.name());
  ASSERT_EQ(other_info.holders.size(), 1u);
  EXPECT_NE(other_info.holders[0].owner, info.holders[0].owner) << "two leases were expected on two sessions";

  const auto removed = b.force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, info.holders[0].owner);
  auto next = b.make_lock(name)->try_acquire_for(10s);
  ASSERT_TRUE(next) << "the name was not free after its session was ended";
  EXPECT_TRUE(dlock::testing::eventually([&] { return held.lost_token().stop_requested(); }))
      << "the holder's session monitor did not report the lease lost";
  std::error_code ec;
  held.release(ec);
  EXPECT_TRUE(b.inspect(name).held) << "the broken holder's release freed the next holder's row lock";
  EXPECT_TRUE(b.inspect(other.name()).held) << "ending one lease's session ended another's";
  next.release();
  other.release();
}

// fair=true: a waiter queued behind the holder shows in inspect, by its owner id, until it is
// granted.
inline void expect_fair_waiters_listed(dlock::backend& b) {
  using namespace std::chrono_literals;
  const auto name = dlock::testing::unique_name("queue");
  auto holder = b.make_lock(name)->try_acquire();
  ASSERT_TRUE(holder);
  auto opts = b.default_options();
  opts.owner = "queued-owner";
  auto waiter = b.make_lock(name, opts);
  auto got = std::async(std::launch::async, [&] { return waiter->try_acquire_for(30s); });
  EXPECT_TRUE(dlock::testing::eventually([&] {
    const auto info = b.inspect(name);
    return info.waiters_known && info.waiters.size() == 1 && info.waiters[0].owner == "queued-owner";
  })) << "the queued waiter does not show in inspect";
  holder.release();
  auto l = got.get();
  ASSERT_TRUE(l);
  const auto info = b.inspect(name);
  EXPECT_TRUE(info.waiters.empty());
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, "queued-owner");
}

}  // namespace dlock::sql::testing
