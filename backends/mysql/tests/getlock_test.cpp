// mysql+getlock:// against a real MariaDB (DLOCK_MYSQL_URI). Fails, never skips, without a server.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cppconn/connection.h>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "../src/getlock_key.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"
#include "hostile_names.hpp"
#include "shared_sessions.hpp"
#include "test_support.hpp"

namespace {

using dlock::testing::fires_within;

using namespace std::chrono_literals;
using namespace dlock::mysql;

std::shared_ptr<dlock::backend> open_getlock(std::string_view query = "ttl=2s") {
  return dlock::open(test::uri_for("mysql+getlock", query));
}

TEST(GetLockKey, PlainNamesStayReadableEverythingElseIsHashedInto64Chars) {
  EXPECT_EQ(getlock_key("jobs/nightly-report.v2"), "jobs/nightly-report.v2");
  for (std::string_view n : std::initializer_list<std::string_view>{"Upper", "has space", "#plain", "quote'",
                                                                    std::string_view("nul\0x", 5)}) {
    const auto k = getlock_key(n);
    EXPECT_EQ(k.front(), '#') << n;
    EXPECT_EQ(k.size(), 64u) << n;
  }
  EXPECT_NE(getlock_key("Lock"), getlock_key("lock"));
  EXPECT_NE(getlock_key("Lock"), getlock_key("LOCK"));
  EXPECT_EQ(getlock_key(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(getlock_key(std::string(65, 'a')).front(), '#');
}

TEST(GetLock, OneHolderAtATimeAndReleaseFreesIt) {
  auto b = open_getlock();
  const auto name = test::unique_name("excl");
  auto a = b->make_lock(name);
  auto other = b->make_lock(name);
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(other->try_acquire());
  EXPECT_FALSE(a->try_acquire()) << "not reentrant: a second acquire through the same object must not succeed";
  held.release();
  auto next = other->try_acquire();
  EXPECT_TRUE(next);
}

TEST(GetLock, KilledHolderConnectionFreesTheLockAndFiresLost) {
  auto b = open_getlock("ttl=1s");
  const auto name = test::unique_name("kill");
  auto a = b->make_lock(name);
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  auto raw = test::raw_connect(test::server_uri());
  const auto holder = test::query_int(*raw, "SELECT IS_USED_LOCK(?)", getlock_key(name));
  ASSERT_TRUE(holder.has_value());
  test::kill_connection(*raw, *holder);
  // The server freed it at once: someone else gets it.
  auto other = b->make_lock(name)->try_acquire_for(5s);
  EXPECT_TRUE(other);
  // The watchdog's liveness check (every ttl/3) notices and fires lost.
  EXPECT_TRUE(fires_within(held.lost_token(), 30s));
  std::error_code ec;
  held.release(ec);
  EXPECT_TRUE(ec == dlock::errc::not_owner || !ec) << ec.message();
}

TEST(GetLock, TimedTryWaitsOnTheServerUntilTheHolderReleases) {
  auto b = open_getlock();
  const auto name = test::unique_name("wait");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] { return b->make_lock(name)->try_acquire_for(20s); });
  std::this_thread::sleep_for(300ms);
  held.release();
  EXPECT_TRUE(waiter.get());
}

TEST(GetLock, SubSecondTimedTryGivesUpWhileHeld) {
  auto b = open_getlock();
  const auto name = test::unique_name("short");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->make_lock(name)->try_acquire_for(200ms));
  EXPECT_TRUE(held.held());
}

TEST(GetLock, HostileNamesAreDistinctLocksAndExcludeThemselves) {
  auto b = open_getlock();
  const auto base = test::unique_name("h");
  auto names = test::names_around(base);
  names.insert(names.end(), {base + "\"", base + "\xc3\xa9t\xc3\xa9", base + "\xff\xfe", base + "#", "#" + base});
  names.push_back(base + std::string(1024 - base.size() - 1, 'x'));  // 1024 bytes: the core's maximum
  names.push_back(base + std::string(64 - base.size() - 1, 'y'));
  names.push_back(base + std::string(64 - base.size(), 'y'));
  names.push_back(base + std::string(64 - base.size() + 1, 'y'));
  std::set<std::string> keys;
  for (const auto& n : names) keys.insert(getlock_key(n));
  ASSERT_EQ(keys.size(), names.size());
  ASSERT_NO_FATAL_FAILURE(dlock::sql::testing::expect_names_held_apart(*b, names));
}

// What opening `uri` throws; nullopt, and a test failure saying it opened `what`, when it opens.
std::optional<dlock::error> error_opening(const std::string& uri, std::string_view what) {
  try {
    auto b = dlock::open(uri);
  } catch (const dlock::error& e) {
    return e;
  }
  ADD_FAILURE() << "opened " << what;
  return std::nullopt;
}

TEST(GetLock, WrongPasswordIsAuthenticationFailedWithoutThePassword) {
  auto text = test::server_uri();
  const auto at = text.find('@');
  const auto colon = text.rfind(':', at);
  ASSERT_NE(at, std::string::npos);
  text = text.substr(0, colon + 1) + "Wr0ng-Pa55" + text.substr(at);
  const auto e = error_opening(test::with_scheme(text, "mysql+getlock"), "with a wrong password");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), dlock::errc::authentication_failed) << e->what();
  EXPECT_EQ(std::string(e->what()).find("Wr0ng-Pa55"), std::string::npos) << e->what();
}

TEST(GetLock, UnknownDatabaseIsNamed) {
  auto text = test::server_uri();
  text = text.substr(0, text.rfind('/')) + "/no_such_db_dlock";
  const auto e = error_opening(test::with_scheme(text, "mysql+getlock"), "an unknown database");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), dlock::errc::backend_error) << e->what();
  EXPECT_NE(std::string(e->what()).find("no_such_db_dlock"), std::string::npos) << e->what();
}

TEST(GetLock, UnreachableServerIsBackendUnavailable) {
  const auto e =
      error_opening("mysql+getlock://dlock:secret@127.0.0.1:1/dlock?connect_timeout=1s", "an unreachable server");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), dlock::errc::backend_unavailable) << e->what();
  EXPECT_EQ(std::string(e->what()).find("secret"), std::string::npos) << e->what();
}

// Every SQL scheme shares sql_common's pool. GET_LOCK holders share connections (max_dedicated/2
// of them): with max_connections=2 (max_dedicated=1) a second holder of another name shares the
// first one's connection. A caller that must wait on a connection of its own (the name is held
// by another process) waits for one within its own deadline, then fails with backend_unavailable
// naming the bound.
TEST(SqlPool, HoldersShareAndAWaiterBeyondTheBoundWaitsItsDeadlineThenNamesIt) {
  auto b = open_getlock("ttl=5s&max_connections=2&checkout_timeout=600ms");
  auto other_process = open_getlock("ttl=5s");
  const auto full = dlock::sql::testing::pool_bound_holds_its_deadline(*b, *other_process);
  EXPECT_TRUE(full.held.held());
}

TEST(SqlPool, AWaitingCallerGetsTheConnectionTheLeasesGiveBack) {
  auto b = open_getlock("ttl=5s&max_connections=2&checkout_timeout=20s");
  auto other_process = open_getlock("ttl=5s");
  auto held = b->make_lock(test::unique_name("back-a"))->try_acquire();
  ASSERT_TRUE(held);
  const auto contended = test::unique_name("back-b");
  auto elsewhere = other_process->make_lock(contended)->try_acquire();
  ASSERT_TRUE(elsewhere);
  auto waiter = std::async(std::launch::async, [&] { return b->make_lock(contended)->try_acquire_for(20s); });
  EXPECT_EQ(waiter.wait_for(500ms), std::future_status::timeout) << "did not wait";
  held.release();  // the shared connection goes back: the waiter gets a connection of its own
  elsewhere.release();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready) << "the released lease's connection never came back";
  EXPECT_TRUE(waiter.get());
}

// 128 concurrent GET_LOCK holders on few connections. The connections the server names
// as holders (IS_USED_LOCK) stay within the shared bound (default max_dedicated=32: 16).
TEST(GetLock, ManyConcurrentHoldersShareAtMost16Connections) {
  auto b = open_getlock("ttl=30s");
  constexpr int holders = 128;
  std::vector<std::string> names;
  for (int i = 0; i < holders; ++i) names.push_back(test::unique_name("many-" + std::to_string(i)));
  std::set<std::int64_t> connections;
  int unheld = 0;
  const auto held = dlock::sql::testing::hold_all_at_once(*b, names, [&] {
    auto raw = test::raw_connect(test::server_uri());
    for (const auto& n : names) {
      const auto id = test::query_int(*raw, "SELECT IS_USED_LOCK(?)", getlock_key(n));
      if (id)
        connections.insert(*id);
      else
        ++unheld;
    }
  });
  EXPECT_EQ(held.granted, holders) << held.failed << " holders failed";
  EXPECT_EQ(unheld, 0);
  EXPECT_LE(connections.size(), 16u) << "the holders did not share connections";
  std::cout << "[ figures ] " << holders << " concurrent GET_LOCK holders on " << connections.size()
            << " connections\n";
}

// Sharing a connection must never let two leases of one process both hold one name (GET_LOCK on
// a name the connection holds succeeds again). Many threads on one name with a single shared
// connection: a read-modify-write counter and an overlap detector.
TEST(GetLock, OneNameStaysMutuallyExclusiveOnASharedConnection) {
  auto b = open_getlock("ttl=10s&max_connections=3");  // max_dedicated 2: 1 shared
  const auto name = test::unique_name("mutex");
  const auto result = dlock::sql::testing::hammer_one_name(*b, name, 16, 60);
  EXPECT_EQ(result.overlaps, 0) << "two leases held one name at once";
  EXPECT_EQ(result.errors, 0);
  EXPECT_EQ(result.counter, result.expected) << "updates were lost";
}

// One lease's ttl running out must not end a session other leases hold locks on
// (shared_sessions.hpp): GET_LOCK's locks are the session's, and the server would free them all.
TEST(GetLock, ALapsedLeaseLeavesItsSharedConnectionToTheOthers) {
  auto b = open_getlock("max_connections=3");  // max_dedicated 2: 1 shared
  auto raw = test::raw_connect(test::server_uri());
  dlock::sql::testing::expect_a_lapsed_lease_to_leave_its_session_to_the_others(
      *b, [&](const std::string& name) { return test::query_int(*raw, "SELECT IS_USED_LOCK(?)", getlock_key(name)); });
}

// A lease outlives its lock and backend: its release still runs on its connection and frees the
// name in the key guard (which the lease keeps alive).
TEST(GetLock, ALeaseOutlivesItsLockAndBackend) {
  const auto name = test::unique_name("outlive");
  dlock::lease held;
  {
    auto b = open_getlock("ttl=10s");
    held = b->make_lock(name)->try_acquire();
  }
  ASSERT_TRUE(held);
  held.release();
  EXPECT_TRUE(open_getlock()->make_lock(name)->try_acquire());
}

// A shared connection KILLed on the server frees every lock on it: every lease on it is told.
TEST(GetLock, AKilledSharedConnectionReportsEveryLeaseOnItLost) {
  auto b = open_getlock("ttl=1s&max_connections=3");
  std::vector<std::string> names;
  std::vector<dlock::lease> leases;
  ASSERT_NO_FATAL_FAILURE(dlock::sql::testing::hold_four_names(*b, names, leases));
  auto raw = test::raw_connect(test::server_uri());
  std::set<std::int64_t> holders;
  for (const auto& n : names)
    holders.insert(test::query_int(*raw, "SELECT IS_USED_LOCK(?)", getlock_key(n)).value_or(-1));
  ASSERT_EQ(holders.size(), 1u) << "the four leases were expected on one shared connection";
  test::kill_connection(*raw, *holders.begin());
  dlock::sql::testing::expect_each_lease_lost_and_its_name_free(*b, names, leases, 30s);
}

// The other bound, on a table scheme: with max_connections=1 the lease holds the only connection,
// and the next checkout waits for it the same way, then names max_connections.
TEST(SqlPool, FullMaxConnectionsWaitsTheSameWayOnATableScheme) {
  auto b = dlock::open(test::uri_for("mysql+forupdate", "ttl=5s&max_connections=1&checkout_timeout=600ms"));
  auto held = b->make_lock(test::unique_name("conn-a"))->try_acquire();
  ASSERT_TRUE(held);
  const auto start = std::chrono::steady_clock::now();
  try {
    auto none = b->make_lock(test::unique_name("conn-b"))->try_acquire();
    FAIL() << "acquired with every connection in use";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_connections=1"), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 550ms);
}

}  // namespace

TEST(GetLockInspection, IsUsedLockNamesTheConnectionAndForceReleaseKillsIt) {
  auto b = dlock::open(test::uri_for("mysql+getlock"));
  auto breaker = dlock::open(test::uri_for("mysql+getlock"));
  const auto name = dlock::testing::unique_name("inspect");
  EXPECT_FALSE(breaker->inspect(name).held);
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto raw = test::raw_connect(test::server_uri());
  const auto holder = test::query_int(*raw, "SELECT IS_USED_LOCK(?)", dlock::mysql::getlock_key(name));
  ASSERT_TRUE(holder);
  const auto info = breaker->inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, "connection " + std::to_string(*holder));
  EXPECT_FALSE(info.waiters_known);

  const auto removed = breaker->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, info.holders[0].owner);
  EXPECT_TRUE(dlock::testing::eventually([&] { return !breaker->inspect(name).held; }));
  EXPECT_TRUE(dlock::testing::fires_within(held.lost_token(), std::chrono::seconds(15)))
      << "the session monitor reports the lease lost";
}
