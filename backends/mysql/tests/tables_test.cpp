// mysql+index, mysql+forupdate, mysql+version against a real MariaDB (DLOCK_MYSQL_URI), each on
// a table of its own per test run so runs never see each other's rows.
#include <gtest/gtest.h>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/statement.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "../src/getlock_key.hpp"
#include "batched_renewal.hpp"
#include "deadline_faults.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"
#include "fair_queue.hpp"
#include "fencing_faults.hpp"
#include "hostile_names.hpp"
#include "inspection.hpp"
#include "partition.hpp"
#include "schema_race.hpp"
#include "test_support.hpp"

namespace {

using dlock::testing::fires_within;

using namespace std::chrono_literals;
using namespace dlock::mysql;

class Tables : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<dlock::backend> open(std::string_view extra = "ttl=2s") {
    return dlock::open(test::uri_for(GetParam(), "table=" + table_ + "&" + std::string(extra)));
  }
  std::string table_ = test::unique_table("t");
};

TEST_P(Tables, OneHolderAtATimeReleaseFreesAndFencesIncrease) {
  auto b = open();
  const auto name = test::unique_name("x");
  auto a = b->make_lock(name);
  auto other = b->make_lock(name);
  auto first = a->try_acquire();
  ASSERT_TRUE(first);
  EXPECT_FALSE(other->try_acquire());
  const auto f1 = first.fencing_token();
  ASSERT_TRUE(f1.has_value());
  first.release();
  auto second = other->try_acquire();
  ASSERT_TRUE(second);
  ASSERT_TRUE(second.fencing_token().has_value());
  EXPECT_GT(*second.fencing_token(), *f1);
}

TEST_P(Tables, HostileNamesAreDistinctLocks) {
  auto b = open();
  const auto base = test::unique_name("h");
  auto names = test::names_around(base);
  names.insert(names.end(), {base + "\xc3\xa9", base + "\xff", base + std::string(512 - base.size(), 'm')});
  ASSERT_NO_FATAL_FAILURE(dlock::sql::testing::expect_names_held_apart(*b, names));
  std::error_code ec;
  auto too_long = b->make_lock(std::string(513, 'z'), b->default_options(), ec);
  EXPECT_EQ(ec, dlock::errc::invalid_name);
}

// Six processes open the same fresh table at the same instant (each runs the DDL), then take
// turns on one lock: every open succeeds and the lock still excludes.
TEST_P(Tables, SchemaCreationRacesFromSeveralProcessesAtOnce) {
  dlock::sql::testing::expect_schema_race(test::uri_for(GetParam(), "table=" + table_ + "&ttl=10s&poll=1ms..20ms"),
                                          test::unique_name("race"));
}

INSTANTIATE_TEST_SUITE_P(Mysql, Tables, ::testing::Values("mysql+index", "mysql+forupdate", "mysql+version"),
                         [](const auto& info) {
                           auto s = info.param.substr(info.param.find('+') + 1);
                           return s;
                         });

// ---- backend::inspect, list and force_release (inspection.hpp)
class RowTables : public Tables {};
TEST_P(RowTables, InspectReportsTheOwnerIdTokenAndTtlLeft) {
  auto b = open("ttl=20s");
  dlock::sql::testing::expect_inspect_reports_the_row(*b);
}
TEST_P(RowTables, ListMatchesThePrefixByteForByteAndSkipsExpiredRows) {
  auto b = open("ttl=20s");
  dlock::sql::testing::expect_list_is_exact(*b, true);
}
TEST_P(RowTables, ForceReleaseMakesTheHoldersReleaseSayNotOwner) {
  auto b = open("ttl=20s");
  dlock::sql::testing::expect_force_release_says_not_owner(*b);
}
INSTANTIATE_TEST_SUITE_P(Mysql, RowTables, ::testing::Values("mysql+index", "mysql+version"),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

TEST(MysqlIndexFair, InspectShowsTheQueuedWaiters) {
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + test::unique_table("t") + "&fair=true&ttl=20s"));
  dlock::sql::testing::expect_fair_waiters_listed(*b);
}
TEST(MysqlForupdate, ListMatchesThePrefixByteForByte) {
  auto b = dlock::open(test::uri_for("mysql+forupdate", "table=" + test::unique_table("t") + "&ttl=20s"));
  dlock::sql::testing::expect_list_is_exact(*b, false);
}
TEST(MysqlForupdate, ForceReleaseKillsTheHoldingConnectionOnly) {
  auto b = dlock::open(test::uri_for("mysql+forupdate", "table=" + test::unique_table("t") + "&ttl=20s"));
  dlock::sql::testing::expect_force_release_ends_the_session(*b, "connection ");
}

TEST(MysqlIndex, ExpiredRowIsTakenOverAndTheOldHolderIsNotOwner) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&ttl=1s&watchdog=false"));
  const auto name = test::unique_name("exp");
  auto old = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(old);
  std::this_thread::sleep_for(1500ms);  // past the server-side expiry
  auto next = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(next) << "an expired row must be taken over without a sweeper";
  EXPECT_GT(*next.fencing_token(), *old.fencing_token());
  std::error_code ec;
  old.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(next.held());
}

TEST(MysqlIndex, ReentrantThroughTheSameObjectWithACount) {
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + test::unique_table("t") + "&ttl=5s"));
  const auto name = test::unique_name("re");
  auto lock = b->make_lock(name);
  auto outer = lock->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = lock->try_acquire();
  ASSERT_TRUE(inner);
  inner.release();
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "still held once";
  outer.release();
  EXPECT_TRUE(b->make_lock(name)->try_acquire());
}

// The watchdog renews the index and version leases due together with one multi-row UPDATE per
// batch; a row deleted and a row another owner took are reported lost, alone (found by renewing
// that batch's leases one by one, since MariaDB's UPDATE returns no rows).
TEST(MysqlTables, WatchdogRenewsLeasesDueTogetherInOneStatement) {
  for (const std::string scheme : {"mysql+index", "mysql+version"}) {
    SCOPED_TRACE(scheme);
    const auto table = test::unique_table("t");
    auto b = dlock::open(test::uri_for(scheme, "table=" + table + "&ttl=3s"));
    auto c = test::raw_connect(test::server_uri());
    dlock::sql::testing::expect_batched_renewal(
        *b, scheme == "mysql+index", [&](const std::string& deleted, const std::string& stolen) {
          std::unique_ptr<::sql::PreparedStatement> del(
              c->prepareStatement("DELETE FROM `" + table + "` WHERE name = ?"));
          del->setString(1, deleted);
          ASSERT_EQ(del->executeUpdate(), 1);
          std::unique_ptr<::sql::PreparedStatement> steal(c->prepareStatement(
              "UPDATE `" + table +
              "` SET owner = 'another-owner', expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE name = ?"));
          steal->setString(1, stolen);
          ASSERT_EQ(steal->executeUpdate(), 1);
        });
    std::unique_ptr<::sql::Statement>(c->createStatement())->execute("DROP TABLE `" + table + "`");
  }
}

// fair=true: the waiters table grants in arrival order; a newcomer's try never barges in.
TEST(MysqlIndexFair, WaitersAreGrantedInArrivalOrderAndLeaveTheQueue) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&fair=true&ttl=5s"));
  EXPECT_TRUE(b->caps().has(dlock::capability::fair));
  EXPECT_FALSE(dlock::open(test::uri_for("mysql+index", "table=" + table))->caps().has(dlock::capability::fair));
  const auto name = test::unique_name("fifo");
  auto raw = test::raw_connect(test::server_uri());
  auto queued = [&] {
    return test::query_int(*raw, "SELECT COUNT(*) FROM `" + table + "_waiters` WHERE name = ? AND expires_at > NOW(6)",
                           name)
        .value_or(-1);
  };
  EXPECT_EQ(dlock::sql::testing::grant_order_of_queued_waiters(*b, name, 4, queued), (std::vector<int>{0, 1, 2, 3}));
  // A waiter that times out leaves the queue too.
  auto again = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(again);
  EXPECT_FALSE(b->make_lock(name)->try_acquire_for(300ms));
  EXPECT_EQ(queued(), 0) << "a waiter that gave up must leave the waiters table";
}

// InnoDB's gap locks span neighbouring names: a fair attempt that read the queue with locks
// deadlocked with attempts on other names, and a try of a free name came back refused. Names
// are neighbours in the index (one prefix, one letter apart); every try of a free one is granted,
// and no contending waiter fails.
TEST(MysqlIndexFair, AFreeNameIsGrantedWhileItsNeighboursAreContended) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&fair=true&ttl=10s&poll=1ms..5ms"));
  const auto prefix = test::unique_name("near");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, grants{0};
  std::mutex m;
  std::string first_failure;
  std::vector<std::thread> contenders;
  for (int t = 0; t < 12; ++t)
    contenders.emplace_back([&, t] {
      auto lock = b->make_lock(prefix + (t % 3 == 0 ? "-d" : "-b"));
      while (!stop) {
        try {
          if (auto held = lock->try_acquire_for(10s)) ++grants;
        } catch (const std::exception& e) {
          std::lock_guard g(m);
          if (failures++ == 0) first_failure = e.what();
        }
      }
    });
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    for (const char* free_name : {"-a", "-c", "-e"}) {
      auto lock = b->make_lock(prefix + free_name);
      if (!lock->try_acquire()) ++refused;
    }
  }
  stop = true;
  for (auto& t : contenders) t.join();
  EXPECT_EQ(refused, 0) << "tries of free names refused while their neighbours were contended";
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(grants.load(), 0);
}

// The optimistic lock's ABA: A's grant expires, B takes the lock and releases it, so the row looks free
// again (owner NULL) -- but the version moved on twice, and A's release and renew must fail.
TEST(MysqlVersion, AbaAStaleHolderCannotReleaseOrRenewAfterTheVersionMoved) {
  auto b = dlock::open(test::uri_for("mysql+version", "table=" + test::unique_table("t") + "&ttl=1s&watchdog=false"));
  const auto name = test::unique_name("aba");
  auto a = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(a);
  std::this_thread::sleep_for(1500ms);
  auto bl = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(bl);
  EXPECT_GT(*bl.fencing_token(), *a.fencing_token());
  bl.release();  // the row is free again: the "A" of A-B-A
  std::error_code ec;
  a.renew(1s, ec);  // the core may already know the validity ran out (lock_lost); else the server says not_owner
  EXPECT_TRUE(ec == dlock::errc::not_owner || ec == dlock::errc::lock_lost) << ec.message();
  a.release(ec);
  EXPECT_TRUE(ec == dlock::errc::not_owner || ec == dlock::errc::lock_lost || !ec) << ec.message();
  auto c = b->make_lock(name)->try_acquire();
  EXPECT_TRUE(c) << "the stale holder must not have re-taken the free row";
}

TEST(MysqlForUpdate, KilledHolderConnectionFreesTheRowAndFiresLost) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+forupdate", "table=" + table));
  const auto name = test::unique_name("kill");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto raw = test::raw_connect(test::server_uri());
  std::unique_ptr<::sql::Statement>(raw->createStatement())
      ->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
  const auto holder = test::query_int(*raw, "SELECT holder FROM `" + table + "` WHERE name = ?", name);
  ASSERT_TRUE(holder.has_value());
  test::kill_connection(*raw, *holder);
  EXPECT_TRUE(fires_within(held.lost_token(), 30s));
  auto next = b->make_lock(name)->try_acquire_for(10s);
  EXPECT_TRUE(next);
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(MysqlForUpdate, TimedTryWaitsOnTheServerForTheHolder) {
  auto b = dlock::open(test::uri_for("mysql+forupdate", "table=" + test::unique_table("t")));
  const auto name = test::unique_name("wait");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->make_lock(name)->try_acquire());
  auto waiter = std::async(std::launch::async, [&] { return b->make_lock(name)->try_acquire_for(20s); });
  std::this_thread::sleep_for(300ms);
  held.release();
  auto got = waiter.get();
  ASSERT_TRUE(got);
}

// A lease holds its transaction open, and that transaction drew from the fencing sequence. MariaDB's
// CREATE SEQUENCE IF NOT EXISTS waits for such a transaction even when the sequence exists, and
// queues every NEXTVAL behind that wait: opening the backend must not run it then, or the opener
// and every grant of the table would wait for a holder of another name.
TEST(MysqlForUpdate, OpeningWhileALeaseIsHeldWaitsForNoHolder) {
  const auto uri = test::uri_for("mysql+forupdate", "table=" + test::unique_table("t"));
  auto first = dlock::open(uri);
  auto held = first->make_lock(test::unique_name("held"))->try_acquire();
  ASSERT_TRUE(held);
  std::atomic<bool> holder_released{false};
  auto opener = std::async(std::launch::async, [&] {
    auto second = dlock::open(uri);
    auto other = second->make_lock(test::unique_name("other"))->try_acquire_for(20s);
    const bool before_the_release = !holder_released.load();
    return other && before_the_release;
  });
  // The holder lets go only when the opener is done, or after 30 s: only an opener that waited for
  // him finishes after the release.
  opener.wait_for(30s);
  holder_released = true;
  held.release();
  EXPECT_TRUE(opener.get()) << "opening the backend, or the grant after it, waited for another name's holder";
}

TEST(MysqlTables, KilledConnectionOfATableStrategyKeepsTheLockUntilExpiry) {
  // The table strategies hold no connection: a dead process's row stays until its ttl passes.
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&ttl=1s&watchdog=false"));
  const auto name = test::unique_name("keep");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto other = dlock::open(test::uri_for("mysql+index", "table=" + table + "&ttl=1s"));
  EXPECT_FALSE(other->make_lock(name)->try_acquire());
  EXPECT_TRUE(other->make_lock(name)->try_acquire_for(10s)) << "free after expiry";
}

TEST(MysqlIndexFair, SchemaCreationWithTheWaitersTableRacesFromSeveralProcesses) {
  dlock::sql::testing::expect_schema_race(
      test::uri_for("mysql+index", "table=" + test::unique_table("t") + "&fair=true&ttl=10s&poll=1ms..20ms"),
      test::unique_name("race"));
}

// ---- raw SQL, as another tool writing the lock tables would
void exec(::sql::Connection& c, const std::string& text, const std::vector<std::string>& params = {}) {
  std::unique_ptr<::sql::PreparedStatement> st(c.prepareStatement(text));
  for (std::size_t i = 0; i < params.size(); ++i) st->setString(static_cast<unsigned>(i + 1), params[i]);
  st->executeUpdate();
}
std::int64_t count_rows(::sql::Connection& c, const std::string& table, const std::string& where,
                        const std::string& param) {
  return test::query_int(c, "SELECT COUNT(*) FROM `" + table + "` WHERE " + where, param).value_or(-1);
}

// The sweeper deletes exactly the expired rows, whoever wrote them, and never a live one.
TEST(MysqlIndexSweep, DeletesExactlyTheExpiredRowsOtherToolsWrote) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&ttl=30s"));
  EXPECT_EQ(b->sweep_target(), "\"" + table + "\"");
  EXPECT_EQ(b->sweep_expired(), 0u) << "an empty table has nothing to sweep";
  auto raw = test::raw_connect(test::server_uri());
  const auto p = test::unique_name("sw");
  const std::string insert = "INSERT INTO `" + table + "` (name, owner, hold_count, fence, expires_at) VALUES ";
  // Three expired rows of other owners (one a re-entered count), one live row of another owner.
  exec(*raw,
       insert + "(?, 'tool-a', 1, 1, NOW(6) - INTERVAL 1 SECOND), (?, 'tool-b', 3, 2, NOW(6) - INTERVAL 1 HOUR),"
                " (?, 'tool-a', 1, 3, '2000-01-01 00:00:00'), (?, 'tool-c', 1, 4, NOW(6) + INTERVAL 1 HOUR)",
       {p + "-old1", p + "-old2", p + "-old3", p + "-live-other"});
  auto ours = b->make_lock(p + "-ours")->try_acquire();  // our live row
  ASSERT_TRUE(ours);
  EXPECT_EQ(b->sweep_expired(), 3u);
  EXPECT_EQ(count_rows(*raw, table, "name LIKE ?", p + "-old%"), 0);
  EXPECT_EQ(count_rows(*raw, table, "name = ?", p + "-live-other"), 1) << "another owner's live row was swept";
  EXPECT_EQ(count_rows(*raw, table, "name = ?", p + "-ours"), 1) << "our live row was swept";
  EXPECT_EQ(b->sweep_expired(), 0u);
  EXPECT_FALSE(b->make_lock(p + "-live-other")->try_acquire()) << "the live row still excludes";
  ours.release();  // still ours after the sweep
  std::error_code ec;
  EXPECT_EQ(b->sweep_expired(ec), 0u);
  EXPECT_FALSE(ec);
}

TEST(MysqlIndexSweep, FairModeAlsoDeletesDeadWaitersOnly) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&fair=true&ttl=30s"));
  EXPECT_EQ(b->sweep_target(), "\"" + table + "\" and \"" + table + "_waiters\"");
  auto raw = test::raw_connect(test::server_uri());
  const auto p = test::unique_name("swf");
  exec(*raw,
       "INSERT INTO `" + table +
           "_waiters` (name, owner, expires_at) VALUES (?, 'dead-1', NOW(6) - INTERVAL 1 SECOND),"
           " (?, 'dead-2', NOW(6) - INTERVAL 1 SECOND), (?, 'alive', NOW(6) + INTERVAL 1 HOUR)",
       {p, p, p});
  exec(*raw,
       "INSERT INTO `" + table +
           "` (name, owner, hold_count, fence, expires_at) VALUES (?, 'x', 1, 1, NOW(6) - INTERVAL 1 SECOND)",
       {p + "-old"});
  EXPECT_EQ(b->sweep_expired(), 3u) << "1 expired lock row + 2 dead waiters";
  EXPECT_EQ(count_rows(*raw, table + "_waiters", "name = ?", p), 1);
  EXPECT_EQ(count_rows(*raw, table + "_waiters", "name = ? AND owner = 'alive'", p), 1);
}

// The version table's rows carry the fencing token: the sweeper frees expired grants, keeping
// the row and its version, so the next grant's token is still larger.
TEST(MysqlVersionSweep, FreesExpiredGrantsButKeepsTheRowAndItsVersion) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+version", "table=" + table + "&ttl=30s"));
  auto raw = test::raw_connect(test::server_uri());
  const auto p = test::unique_name("swv");
  exec(*raw,
       "INSERT INTO `" + table +
           "` (name, version, owner, expires_at) VALUES (?, 7, 'tool', NOW(6) - INTERVAL 1 SECOND),"
           " (?, 3, 'tool', NOW(6) + INTERVAL 1 HOUR), (?, 5, NULL, NULL)",
       {p + "-expired", p + "-live", p + "-free"});
  EXPECT_EQ(b->sweep_expired(), 1u);
  EXPECT_EQ(count_rows(*raw, table, "name = ? AND owner IS NULL AND version = 7", p + "-expired"), 1);
  EXPECT_EQ(count_rows(*raw, table, "name = ? AND owner = 'tool' AND version = 3", p + "-live"), 1);
  auto next = b->make_lock(p + "-expired")->try_acquire();
  ASSERT_TRUE(next);
  EXPECT_EQ(*next.fencing_token(), 8u) << "the version continued after the sweep";
  EXPECT_EQ(b->sweep_expired(), 0u);
}

TEST(MysqlForUpdateSweep, HasNothingToSweep) {
  auto b = dlock::open(test::uri_for("mysql+forupdate", "table=" + test::unique_table("t")));
  EXPECT_EQ(b->sweep_target(), "");
  EXPECT_EQ(b->sweep_expired(), 0u);
}

// Release deletes the row (one statement); releasing one of two re-entries only decrements it.
TEST(MysqlIndex, ReleaseDeletesTheRowAndAReentryOnlyDecrementsTheCount) {
  const auto table = test::unique_table("t");
  auto b = dlock::open(test::uri_for("mysql+index", "table=" + table + "&ttl=30s"));
  auto raw = test::raw_connect(test::server_uri());
  const auto name = test::unique_name("del");
  auto lock = b->make_lock(name);
  auto outer = lock->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = lock->try_acquire();
  ASSERT_TRUE(inner);
  EXPECT_EQ(test::query_int(*raw, "SELECT hold_count FROM `" + table + "` WHERE name = ?", name), 2);
  inner.release();
  EXPECT_EQ(test::query_int(*raw, "SELECT hold_count FROM `" + table + "` WHERE name = ?", name), 1)
      << "releasing one of two re-entries must keep the row, one hold fewer";
  const auto fence = *outer.fencing_token();
  outer.release();
  EXPECT_EQ(count_rows(*raw, table, "name = ?", name), 0) << "the last release must delete the row";
  auto next = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(next);
  EXPECT_GT(*next.fencing_token(), fence) << "the fence comes from the sequence: deleting the row loses nothing";
  // Another owner's live row: our release is refused and leaves it alone.
  exec(*raw, "UPDATE `" + table + "` SET owner = 'someone-else' WHERE name = ?", {name});
  std::error_code ec;
  next.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_EQ(count_rows(*raw, table, "name = ? AND owner = 'someone-else'", name), 1);
}

// The server-side connection id holding `name`, for the connection-bound schemes (0: none).
std::int64_t holder_connection(const std::string& scheme, const std::string& table, const std::string& name) {
  auto raw = test::raw_connect(test::server_uri());
  if (scheme == "mysql+getlock") return test::query_int(*raw, "SELECT IS_USED_LOCK(?)", getlock_key(name)).value_or(0);
  if (scheme != "mysql+forupdate") return 0;
  std::unique_ptr<::sql::Statement>(raw->createStatement())
      ->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
  return test::query_int(*raw, "SELECT holder FROM `" + table + "` WHERE name = ?", name).value_or(0);
}

// A grant's fencing token must be larger than every token handed out before it for that name,
// whatever happened to the previous holder: its connection killed on the server while it held
// the lock (forupdate: the killed transaction's increment used to be rolled back, so the next
// holder got the same token), or the server restarted while it held the lock. Table schemes
// hold no connection: their holder is abandoned instead (ttl 1s, no watchdog), as a crashed
// process would leave it.
class Fencing : public ::testing::TestWithParam<std::string> {};
TEST_P(Fencing, TokensStrictlyIncreaseAcrossAConnectionKillAndAServerRestart) {
  const auto table = test::unique_table("t");
  const auto query = "table=" + table + "&ttl=1s&watchdog=false";
  const bool getlock = GetParam() == "mysql+getlock";
  auto open_backend = [&] { return dlock::open(test::uri_for(GetParam(), getlock ? "ttl=1s&watchdog=false" : query)); };
  auto holder_backend = open_backend();
  ASSERT_TRUE(holder_backend->caps().has(dlock::capability::fencing)) << GetParam() << " must declare fencing";
  const auto name = test::unique_name("fence-fault");
  auto first = holder_backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first.fencing_token());

  // 1. The holder's connection killed on the server while it holds the lock.
  if (const auto id = holder_connection(GetParam(), table, name); id != 0) {
    auto raw = test::raw_connect(test::server_uri());
    test::kill_connection(*raw, id);
  } else {
    ASSERT_TRUE(GetParam() == "mysql+index" || GetParam() == "mysql+version") << "no holder connection found";
  }
  dlock::sql::testing::expect_tokens_rise_after_a_kill_and_a_restart(name, *first.fencing_token(), open_backend,
                                                                     "mariadb", "connection kill");
}
INSTANTIATE_TEST_SUITE_P(Mysql, Fencing,
                         ::testing::Values("mysql+index", "mysql+forupdate", "mysql+version", "mysql+getlock"),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// A holder cut off from the server by a partition (nothing delivered, nothing closed) must be
// told it may have lost the lock while the link is still down, within about ttl of the cut: the
// server may drop its connection meanwhile and grant the lock to someone else. Before, the
// forupdate monitor only read the socket (silent in a partition) and getlock's liveness check
// blocked on it for command_timeout: both told the holder only when the link came back. The
// bound (release_after_a_partition, partition.hpp) is a generous margin on "before ttl + margin, while still
// partitioned", not a speed claim.
class Partition : public ::testing::TestWithParam<std::string> {};
TEST_P(Partition, APartitionedHolderIsToldBeforeTheLinkReturns) {
  const char* host = std::getenv("DLOCK_MYSQL_HOST");
  const char* port = std::getenv("DLOCK_MYSQL_PORT");
  ASSERT_TRUE(host && port) << "DLOCK_MYSQL_HOST/PORT are not set: start the servers with dlock-servers up mariadb";
  dlock::testing::tcp_proxy proxy(host, static_cast<std::uint16_t>(std::stoi(port)));
  auto u = test::uri_for(GetParam(), "ttl=3s&table=" + test::unique_table("t"));
  if (GetParam() == "mysql+getlock") u = test::uri_for(GetParam(), "ttl=3s");
  const std::string server = std::string(host) + ":" + port;
  ASSERT_NE(u.find(server), std::string::npos);
  u.replace(u.find(server), server.size(), proxy.address());
  const auto ec = dlock::sql::testing::release_after_a_partition(u, proxy, GetParam());
  EXPECT_TRUE(ec == dlock::errc::not_owner || ec == dlock::errc::lock_lost) << ec.message();
}
TEST(MysqlPartition, LeasesOfAPartitionedSharedConnectionLeaveItWithoutWaitingOnTheLink) {
  const char* host = std::getenv("DLOCK_MYSQL_HOST");
  const char* port = std::getenv("DLOCK_MYSQL_PORT");
  ASSERT_TRUE(host && port) << "DLOCK_MYSQL_HOST/PORT are not set: start the servers with dlock-servers up mariadb";
  dlock::testing::tcp_proxy proxy(host, static_cast<std::uint16_t>(std::stoi(port)));
  auto u = test::uri_for("mysql+getlock", "ttl=3s&max_connections=3");
  const std::string server = std::string(host) + ":" + port;
  ASSERT_NE(u.find(server), std::string::npos);
  u.replace(u.find(server), server.size(), proxy.address());
  dlock::sql::testing::expect_partitioned_shared_leases_to_leave(u, proxy);
}

INSTANTIATE_TEST_SUITE_P(Mysql, Partition, ::testing::Values("mysql+forupdate", "mysql+getlock"),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// Every mysql scheme: a waiting acquire (every form the scheme offers) ends by its deadline + 2 s
// whatever the server does: accepts and never answers (the pool connects inside the acquire),
// stops answering, refuses (deadline_faults.hpp). Before, OPT_CONNECT_TIMEOUT (5 s) ran past a
// 1 s deadline, and a silent server held a statement up to command_timeout (30 s).
class Deadline : public ::testing::TestWithParam<std::string> {};

TEST_P(Deadline, AcquiresEndByTheirDeadlineWhateverTheServerDoes) {
  dlock::sql_testing::expect_acquires_end_by_their_deadline(test::uri_for(GetParam(), "ttl=5s"));
}

// A stop request ends every waiting form while the pool is still opening its connection.
TEST_P(Deadline, AStopEndsAcquiresStillConnecting) {
  dlock::sql_testing::expect_a_stop_ends_acquires_still_connecting(test::uri_for(GetParam(), "ttl=5s"));
}

// dlock::open has no deadline: it connects once, bounded by connect_timeout (whole seconds).
TEST_P(Deadline, OpenIsBoundedByConnectTimeout) {
  const auto target = dlock::uri::parse(test::uri_for(GetParam()));
  dlock::testing::tcp_proxy proxy(target.hosts().front().host, target.hosts().front().port_or(3306));
  proxy.partition();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW((void)dlock::open(dlock::sql_testing::through(test::uri_for(GetParam(), "connect_timeout=2s"), proxy)),
               dlock::error);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 1900ms);
  EXPECT_LE(took, 4000ms) << "open waited past connect_timeout";
  proxy.heal();
}

INSTANTIATE_TEST_SUITE_P(Mysql, Deadline,
                         ::testing::Values("mysql+getlock", "mysql+index", "mysql+forupdate", "mysql+version"),
                         [](const auto& info) { return std::string(info.param).substr(6); });

}  // namespace
