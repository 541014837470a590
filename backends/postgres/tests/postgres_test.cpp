// PostgreSQL backend tests against a real server: DLOCK_POSTGRES_URI (the native launcher's
// postgres://dlock:dlock-secret@127.0.0.1:PORT/dlock); each test substitutes the scheme.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <stop_token>
#include <thread>

#include "batched_renewal.hpp"
#include "deadline_faults.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"
#include "fair_queue.hpp"
#include "fencing_faults.hpp"
#include "hostile_names.hpp"
#include "inspection.hpp"
#include "partition.hpp"
#include "pg_probe.hpp"
#include "schema_race.hpp"
#include "shared_sessions.hpp"

using namespace std::chrono_literals;
namespace probe = dlock::pg::testing;

namespace {

using dlock::testing::eventually;

// postgres://... -> <scheme>://...?<query>
std::string uri_for(const std::string& scheme, const std::string& query = "") {
  return dlock::testing::with_query(
      dlock::testing::with_scheme(dlock::testing::server_uri("DLOCK_POSTGRES_URI"), scheme), query);
}

using dlock::testing::unique_name;

const std::vector<std::string> all_schemes{"postgres+index", "postgres+forupdate", "postgres+version",
                                           "postgres+advisory"};
const std::vector<std::string> table_schemes{"postgres+index", "postgres+version"};
const std::vector<std::string> session_schemes{"postgres+forupdate", "postgres+advisory"};

class each_scheme : public ::testing::TestWithParam<std::string> {};

TEST_P(each_scheme, excludes_and_releases) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=5s"));
  const auto name = unique_name("basic");
  auto a = be->make_lock(name), b = be->make_lock(name);
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), name));
  EXPECT_FALSE(b->try_acquire());
  held.release();
  EXPECT_FALSE(probe::held_on_server(uri_for(GetParam()), name));
  auto again = b->try_acquire();
  EXPECT_TRUE(again);
}

TEST_P(each_scheme, fencing_tokens_increase_when_declared) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=5s"));
  auto lock = be->make_lock(unique_name("fence"));
  std::optional<std::uint64_t> last;
  for (int i = 0; i < 3; ++i) {
    auto l = lock->try_acquire();
    ASSERT_TRUE(l);
    if (!be->caps().has(dlock::capability::fencing)) {
      EXPECT_FALSE(l.fencing_token());
      continue;
    }
    ASSERT_TRUE(l.fencing_token());
    if (last) {
      EXPECT_GT(*l.fencing_token(), *last);
    }
    last = l.fencing_token();
  }
}

// Quotes, backslashes, LIKE wildcards, NUL bytes, non-ASCII, the maximum length, and names that
// differ only in case: each held independently, none colliding with another.
TEST_P(each_scheme, hostile_names_are_distinct_and_exact) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=10s"));
  const auto prefix = unique_name("h") + "/";
  auto names = dlock::sql::testing::hostile_names(be->limits().max_length - prefix.size());
  std::vector<dlock::lease> held;
  for (const auto& n : names) {
    auto l = be->make_lock(prefix + n)->try_acquire();
    ASSERT_TRUE(l) << "could not take hostile name #" << held.size();
    held.push_back(std::move(l));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(be->make_lock(prefix + names[i])->try_acquire()) << "name #" << i << " not excluded";
    EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), prefix + names[i])) << "name #" << i;
  }
  // "plain" released: "Plain" and "PLAIN" stay held.
  held[0].release();
  EXPECT_FALSE(probe::held_on_server(uri_for(GetParam()), prefix + names[0]));
  EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), prefix + names[1]));
  EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), prefix + names[2]));
  for (auto& l : held) l.release();
}

TEST_P(each_scheme, timed_wait_gets_the_lock_when_released) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=20s"));
  const auto name = unique_name("wait");
  auto first = be->make_lock(name)->try_acquire();
  ASSERT_TRUE(first);
  auto waiter = be->make_lock(name);
  auto got = std::async(std::launch::async, [&] { return waiter->try_acquire_for(15s); });
  std::this_thread::sleep_for(300ms);
  first.release();
  auto l = got.get();
  EXPECT_TRUE(l);
}

TEST_P(each_scheme, timed_try_gives_up_while_held) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=20s"));
  const auto name = unique_name("giveup");
  auto first = be->make_lock(name)->try_acquire();
  ASSERT_TRUE(first);
  EXPECT_FALSE(be->make_lock(name)->try_acquire_for(300ms));
  first.release();
  // Nothing was left behind by the timed out attempt (advisory: no stacked key on a pooled session).
  EXPECT_FALSE(probe::held_on_server(uri_for(GetParam()), name));
  EXPECT_TRUE(be->make_lock(name)->try_acquire());
}

// A waiting acquire (every form the scheme offers) ends by its deadline + 2 s whatever the server
// does: accepts and never answers (the pool connects inside the acquire), stops answering,
// refuses (deadline_faults.hpp). Before, libpq's connect_timeout (5 s) ran past a 1 s deadline,
// and a silent server held a statement for as long as TCP did.
TEST_P(each_scheme, acquires_end_by_their_deadline_whatever_the_server_does) {
  dlock::sql_testing::expect_acquires_end_by_their_deadline(uri_for(GetParam(), "ttl=5s"));
}

// A stop request ends every waiting form while the pool is still opening its connection.
TEST_P(each_scheme, a_stop_ends_acquires_still_connecting) {
  dlock::sql_testing::expect_a_stop_ends_acquires_still_connecting(uri_for(GetParam(), "ttl=5s"));
}

// dlock::open has no deadline: it connects once, bounded by connect_timeout (now to the
// millisecond: dlock drives libpq's connect itself).
TEST_P(each_scheme, open_is_bounded_by_connect_timeout) {
  dlock::testing::tcp_proxy proxy("127.0.0.1", dlock::uri::parse(uri_for(GetParam())).hosts().front().port_or(5432));
  proxy.partition();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW((void)dlock::open(dlock::sql_testing::through(uri_for(GetParam(), "connect_timeout=1500ms"), proxy)),
               dlock::error);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 1400ms);
  EXPECT_LE(took, 3500ms) << "open waited past connect_timeout";
  proxy.heal();
}

INSTANTIATE_TEST_SUITE_P(pg, each_scheme, ::testing::ValuesIn(all_schemes),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// The holder's connection killed from the server side: connection-bound schemes free the lock
// and report it lost.
class session_scheme : public ::testing::TestWithParam<std::string> {};
TEST_P(session_scheme, terminated_session_frees_the_lock_and_reports_lost) {
  auto be = dlock::open(uri_for(GetParam()));
  const auto name = unique_name("kill");
  auto held = be->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_GT(probe::break_lock(uri_for(GetParam()), name), 0);
  EXPECT_TRUE(eventually([&] { return held.lost_token().stop_requested(); })) << "lost notification never fired";
  EXPECT_TRUE(eventually([&] { return !probe::held_on_server(uri_for(GetParam()), name); }));
  EXPECT_TRUE(be->make_lock(name)->try_acquire());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}
INSTANTIATE_TEST_SUITE_P(pg, session_scheme, ::testing::ValuesIn(session_schemes),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// A holder cut off from the server by a partition (nothing delivered, nothing closed) must be
// told it may have lost the lock while the link is still down, within about ttl of the cut: the
// server may drop its session meanwhile and grant the lock to someone else. The old session
// monitor only read the socket, which says nothing in a partition: the holder was told when the
// link came back. The bound (release_after_a_partition, partition.hpp) is a generous margin on
// the property "before ttl + margin, while still partitioned", not a speed claim.
TEST_P(session_scheme, a_partitioned_holder_is_told_before_the_link_returns) {
  const char* host = std::getenv("DLOCK_POSTGRES_HOST");
  const char* port = std::getenv("DLOCK_POSTGRES_PORT");
  ASSERT_TRUE(host && port) << "DLOCK_POSTGRES_HOST/PORT are not set: start the servers with dlock-servers up postgres";
  dlock::testing::tcp_proxy proxy(host, static_cast<std::uint16_t>(std::stoi(port)));
  auto u = uri_for(GetParam(), "ttl=3s");
  const std::string server = std::string(host) + ":" + port;
  ASSERT_NE(u.find(server), std::string::npos);
  u.replace(u.find(server), server.size(), proxy.address());
  EXPECT_EQ(dlock::sql::testing::release_after_a_partition(u, proxy, GetParam()), dlock::errc::not_owner);
}

// Kills, on the server, every session whose application_name is `app` (this test's own: the
// others belong to other tests), and waits until they are gone: pg_terminate_backend only
// signals (then a pool's idle check sees the closed sockets and reconnects).
bool terminate_sessions_of(const std::string& uri, const std::string& app) {
  auto admin = probe::connect(uri);
  const std::string ours = " FROM pg_stat_activity WHERE application_name = '" + app +
                           "' AND datname = current_database()"
                           " AND pid <> pg_backend_pid() AND backend_type = 'client backend'";
  probe::exec(admin.get(), "SELECT pg_terminate_backend(pid)" + ours);
  return eventually([&] { return probe::exec(admin.get(), "SELECT 1" + ours).rows.empty(); }, 10s);
}

// Table schemes: the grant is a row; killing every session of ours changes nothing until expiry,
// then another owner takes the expired row over (no sweeper) with a larger fence, and the old
// holder's release is refused.
class table_scheme : public ::testing::TestWithParam<std::string> {};
TEST_P(table_scheme, row_outlives_sessions_and_is_taken_over_after_expiry) {
  // Our sessions only, by an application_name of this test: the others belong to other tests.
  const auto app = unique_name("dlock-test");
  // ttl 3 s: killing the sessions and the probes below must come before the expiry (with 1 s they
  // did not, now and then, on a loaded machine), and the takeover after it.
  auto be = dlock::open(uri_for(GetParam(), "ttl=3s&watchdog=false&application_name=" + app));
  const auto name = unique_name("expire");
  auto held = be->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  ASSERT_TRUE(terminate_sessions_of(uri_for(GetParam()), app)) << "our sessions outlived pg_terminate_backend";
  EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), name));
  auto other = be->make_lock(name);
  EXPECT_FALSE(other->try_acquire());  // may reconnect (the pool dropped its dead connections)
  ASSERT_TRUE(eventually([&] { return !probe::held_on_server(uri_for(GetParam()), name); }, 10s));
  auto taken = other->try_acquire();
  ASSERT_TRUE(taken) << "expired row was not taken over";
  EXPECT_GT(*taken.fencing_token(), *held.fencing_token());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(probe::held_on_server(uri_for(GetParam()), name)) << "a stale release freed the new holder's row";
}
INSTANTIATE_TEST_SUITE_P(pg, table_scheme, ::testing::ValuesIn(table_schemes),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// ---- backend::inspect, list and force_release (inspection.hpp)
TEST_P(table_scheme, inspect_reports_the_owner_id_token_and_ttl_left) {
  auto be = dlock::open(uri_for(GetParam()));
  dlock::sql::testing::expect_inspect_reports_the_row(*be);
}
TEST_P(table_scheme, list_matches_the_prefix_byte_for_byte_and_skips_expired_rows) {
  auto be = dlock::open(uri_for(GetParam(), "ttl=20s"));
  dlock::sql::testing::expect_list_is_exact(*be, true);
}
TEST_P(table_scheme, force_release_makes_the_holders_release_say_not_owner) {
  auto be = dlock::open(uri_for(GetParam()));
  dlock::sql::testing::expect_force_release_says_not_owner(*be);
}
TEST(postgres_index_fair, inspect_shows_the_queued_waiters) {
  auto be = dlock::open(uri_for("postgres+index", "fair=true&ttl=20s"));
  dlock::sql::testing::expect_fair_waiters_listed(*be);
}
TEST(postgres_forupdate, list_matches_the_prefix_byte_for_byte) {
  auto be = dlock::open(uri_for("postgres+forupdate", "ttl=20s"));
  dlock::sql::testing::expect_list_is_exact(*be, false);
}
TEST(postgres_forupdate, force_release_terminates_the_holding_session_only) {
  auto be = dlock::open(uri_for("postgres+forupdate"));
  dlock::sql::testing::expect_force_release_ends_the_session(*be, "pid ");
}

// A grant's fencing token must be larger than every token handed out before it for that name,
// whatever happened to the previous holder: its session killed on the server while it held the
// lock (forupdate: the killed transaction's increment used to be rolled back, so the next
// holder got the same token), or the server restarted while it held the lock. Declared by
// every scheme (advisory: from a sequence read in the granting statement).
class fencing_scheme : public ::testing::TestWithParam<std::string> {};
TEST_P(fencing_scheme, tokens_strictly_increase_across_a_session_kill_and_a_server_restart) {
  const auto app = unique_name("dlock-fence");
  // ttl 1s without a watchdog: a table scheme's orphaned row expires soon; session schemes are
  // freed when their session ends.
  auto holder_backend = dlock::open(uri_for(GetParam(), "ttl=1s&watchdog=false&application_name=" + app));
  ASSERT_TRUE(holder_backend->caps().has(dlock::capability::fencing)) << GetParam() << " must declare fencing";
  const auto name = unique_name("fence-fault");
  auto first = holder_backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first.fencing_token());

  // 1. The holder's sessions killed on the server while it holds the lock.
  ASSERT_TRUE(terminate_sessions_of(uri_for(GetParam()), app)) << "our sessions outlived pg_terminate_backend";
  dlock::sql::testing::expect_tokens_rise_after_a_kill_and_a_restart(
      name, *first.fencing_token(), [&] { return dlock::open(uri_for(GetParam(), "ttl=1s&watchdog=false")); },
      "postgres", "session kill");
}
INSTANTIATE_TEST_SUITE_P(pg, fencing_scheme, ::testing::ValuesIn(all_schemes),
                         [](const auto& info) { return info.param.substr(info.param.find('+') + 1); });

// The ABA case of an optimistic (version) lock: A's grant expires, the row goes through other
// owners and looks free again; A's stale version must not match anything.
TEST(version, aba_stale_version_matches_nothing) {
  const auto uri = uri_for("postgres+version", "ttl=1s&watchdog=false");
  auto be = dlock::open(uri);
  const auto name = unique_name("aba");
  auto a = be->make_lock(name);
  auto first = a->try_acquire();
  ASSERT_TRUE(first);
  const auto stale_version = static_cast<std::int64_t>(*first.fencing_token());
  ASSERT_TRUE(eventually([&] { return !probe::held_on_server(uri, name); }, 10s));
  {
    auto b = be->make_lock(name)->try_acquire();  // B takes the expired row...
    ASSERT_TRUE(b);
  }  // ...and releases it: the row is free again (A), with another version (B-A-B)
  EXPECT_FALSE(probe::held_on_server(uri, name));
  // A's conditional update with the version it read before: 0 rows.
  auto admin = probe::connect(uri);
  auto r = probe::exec(admin.get(),
                       "UPDATE dlock_version SET owner = 'A', version = version + 1 WHERE name = $1 AND version = $2"
                       " AND (owner IS NULL OR expires_at <= clock_timestamp())",
                       {dlock::sql::bytes{name}, stale_version - 1});
  EXPECT_EQ(r.rows_affected, 0u);
  // And through dlock: the same lock object re-acquires; its old lease's release is refused
  // and does not free the new grant, although the owner is the same.
  auto second = a->try_acquire();
  ASSERT_TRUE(second);
  std::error_code ec;
  first.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(probe::held_on_server(uri, name));
}

TEST(index, reentrant_through_the_same_owner_counts_holds) {
  auto be = dlock::open(uri_for("postgres+index", "ttl=10s"));
  const auto name = unique_name("reenter");
  auto lock = be->make_lock(name);
  auto outer = lock->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = lock->try_acquire();
  ASSERT_TRUE(inner);
  EXPECT_EQ(*inner.fencing_token(), *outer.fencing_token());
  EXPECT_FALSE(be->make_lock(name)->try_acquire());
  inner.release();
  EXPECT_TRUE(probe::held_on_server(uri_for("postgres+index"), name));
  outer.release();
  EXPECT_FALSE(probe::held_on_server(uri_for("postgres+index"), name));
}

// ---- postgres+index NOTIFYs only when an attempt missed on the released row (pg_sql.cpp).
std::string hex_of(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

// A LISTEN session of the test's own on a table's channel; `until_marker` sends a marker NOTIFY
// from another session and returns every payload received before it (notifications arrive in
// commit order, so whatever a release committed before the marker is in the list).
// Drops a test's own table and its fence sequence.
void drop_table(const std::string& table) {
  auto c = probe::connect(uri_for("postgres+index"));
  probe::exec(c.get(), "DROP TABLE IF EXISTS \"" + table + "\"");
  probe::exec(c.get(), "DROP SEQUENCE IF EXISTS \"" + table + "_fence\"");
}

struct channel_listener {
  std::string uri, channel;
  dlock::pg::pgconn_ptr listening = probe::connect(uri);
  channel_listener(std::string u, std::string ch) : uri(std::move(u)), channel(std::move(ch)) {
    probe::exec(listening.get(), "LISTEN \"" + channel + "\"");
  }
  std::vector<std::string> until_marker() {
    const std::string marker = "marker-" + dlock::spi::random_token().substr(0, 8);
    auto other = probe::connect(uri);
    probe::exec(other.get(), "SELECT pg_notify($1, $2)", {channel, marker});
    std::vector<std::string> seen;
    const bool got = eventually([&] {
      PQconsumeInput(listening.get());
      while (PGnotify* n = PQnotifies(listening.get())) {
        std::string payload = n->extra;
        PQfreemem(n);
        if (payload == marker) return true;
        seen.push_back(std::move(payload));
      }
      return false;
    });
    EXPECT_TRUE(got) << "the marker notification never arrived";
    return seen;
  }
};

TEST(index_notify, a_release_nobody_waited_for_sends_no_notification_and_a_missed_attempt_gets_one) {
  const std::string table = "notify_" + dlock::spi::random_token().substr(0, 8);
  const auto uri = uri_for("postgres+index", "ttl=10s&table=" + table);
  auto be = dlock::open(uri);
  channel_listener listener(uri_for("postgres+index"), "dlock_" + table);
  const auto name = unique_name("notify");
  auto a = be->make_lock(name), b = be->make_lock(name);
  for (int i = 0; i < 3; ++i) {  // uncontended, re-entered or not: nobody to wake
    auto held = a->try_acquire();
    ASSERT_TRUE(held);
    auto inner = a->try_acquire();
    ASSERT_TRUE(inner);
    inner.release();
    held.release();
  }
  for (const auto& payload : listener.until_marker()) EXPECT_NE(payload, hex_of(name)) << "notified with no waiter";

  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(b->try_acquire());  // the miss marks the row: its release must notify
  EXPECT_FALSE(b->try_acquire());  // a second miss changes nothing (one notification per release)
  held.release();
  const auto seen = listener.until_marker();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), hex_of(name)), 1) << "the release after a miss did not notify once";

  auto next = b->try_acquire();  // a new row: the mark went with the old one
  ASSERT_TRUE(next);
  next.release();
  for (const auto& payload : listener.until_marker()) EXPECT_NE(payload, hex_of(name)) << "a stale mark notified";
  drop_table(table);
}

// The race the mark closes: a waiter that misses just before the holder's release must be woken
// by that release. poll.max is an hour, so the waiter never re-checks on its own: a lost wake-up
// shows as an acquire that runs into its 20 s deadline, not as a slow one.
TEST(index_notify, a_waiter_arriving_as_the_holder_releases_is_always_woken) {
  const std::string table = "notify_" + dlock::spi::random_token().substr(0, 8);
  auto be = dlock::open(uri_for("postgres+index", "ttl=30s&poll=1h&table=" + table));
  const auto name = unique_name("race");
  auto holder = be->make_lock(name), waiter = be->make_lock(name);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_us(0, 2000);
  for (int i = 0; i < 300; ++i) {
    auto held = holder->try_acquire();
    ASSERT_TRUE(held) << "iteration " << i;
    auto got = std::async(std::launch::async, [&] { return waiter->try_acquire_for(20s); });
    std::this_thread::sleep_for(std::chrono::microseconds{delay_us(rng)});
    held.release();
    auto lease = got.get();
    ASSERT_TRUE(lease) << "iteration " << i << ": the waiter was never woken";
    lease.release();
  }
  drop_table(table);
}

// A table created before the `waiting` column gets it at open (create_table=true), and works.
TEST(index_notify, a_table_without_the_waiting_column_gets_it_at_open) {
  const std::string table = "oldlayout_" + dlock::spi::random_token().substr(0, 8);
  auto c = probe::connect(uri_for("postgres+index"));
  probe::exec(c.get(), "CREATE TABLE \"" + table +
                           "\" (name bytea PRIMARY KEY, owner text NOT NULL, hold_count integer NOT NULL,"
                           " expires_at timestamptz NOT NULL, fence bigint NOT NULL)");
  auto be = dlock::open(uri_for("postgres+index", "ttl=10s&table=" + table));
  auto cols = probe::exec(c.get(), "SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'waiting'",
                          {std::string("\"" + table + "\"")});
  EXPECT_EQ(cols.rows.size(), 1u);
  const auto name = unique_name("old");
  auto held = be->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(be->make_lock(name)->try_acquire());
  held.release();
  EXPECT_TRUE(be->make_lock(name)->try_acquire());
  (void)dlock::open(uri_for("postgres+index", "ttl=10s&table=" + table));  // a second open: nothing to add
  drop_table(table);
}

// The table schemes keep every connection the pool opened (up to max_connections) when the URI
// gives no pool_size: 16 statements at once, twice, run on the same 16 server sessions (with 8
// kept, the second round forked 8 new ones). The statements are made to overlap by a row lock
// the test holds, so 16 connections are checked out at once without any timing.
TEST(index_pool, sixteen_concurrent_statements_reuse_their_sixteen_sessions) {
  const std::string app = "dlock_pool_" + dlock::spi::random_token().substr(0, 8);
  auto be = dlock::open(uri_for("postgres+index", "ttl=10s&application_name=" + app));
  const auto name = unique_name("pool");
  auto held = be->make_lock(name)->try_acquire();  // the row the statements will wait on
  ASSERT_TRUE(held);
  auto admin = probe::connect(uri_for("postgres+index"));
  auto sessions = [&](const char* extra) {
    std::set<std::string> pids;
    for (auto& r :
         probe::exec(admin.get(),
                     std::string("SELECT pid::text FROM pg_stat_activity WHERE application_name = $1") + extra, {app})
             .rows)
      pids.insert(*r[0]);
    return pids;
  };
  auto round = [&] {
    auto blocker = probe::connect(uri_for("postgres+index"));
    probe::exec(blocker.get(), "BEGIN");
    probe::exec(blocker.get(), "SELECT 1 FROM dlock_index WHERE name = $1 FOR UPDATE", {dlock::sql::bytes{name}});
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) threads.emplace_back([&] { EXPECT_FALSE(be->make_lock(name)->try_acquire()); });
    EXPECT_TRUE(eventually([&] { return sessions(" AND wait_event_type = 'Lock'").size() == 16; }));
    probe::exec(blocker.get(), "COMMIT");
    for (auto& t : threads) t.join();
    return sessions("");
  };
  const auto first = round();
  EXPECT_GE(first.size(), 16u);
  EXPECT_EQ(round(), first) << "sessions were closed and re-opened between the rounds";
}

// The watchdog renews the index and version leases due together with one UPDATE ... FROM
// (VALUES ...) RETURNING per batch: a deleted row and a row another owner took are reported
// lost, alone.
TEST(index, watchdog_renews_leases_due_together_in_one_statement) {
  for (const std::string scheme : {"postgres+index", "postgres+version"}) {
    SCOPED_TRACE(scheme);
    const auto table = "batch_" + dlock::spi::random_token().substr(0, 10);
    auto be = dlock::open(uri_for(scheme, "table=" + table + "&ttl=3s"));
    auto admin = probe::connect(uri_for(scheme));
    using dlock::sql::bytes;
    dlock::sql::testing::expect_batched_renewal(
        *be, scheme == "postgres+index", [&](const std::string& deleted, const std::string& stolen) {
          probe::exec(admin.get(), "DELETE FROM " + table + " WHERE name = $1", {bytes{deleted}});
          probe::exec(admin.get(),
                      "UPDATE " + table +
                          " SET owner = 'another-owner', expires_at = clock_timestamp() + interval '1 minute'"
                          " WHERE name = $1",
                      {bytes{stolen}});
        });
    probe::exec(admin.get(), "DROP TABLE " + table);
  }
}

// ---- fair=true (postgres+index): the waiters table grants in arrival order.
std::int64_t queued(const std::string& name) {
  auto c = probe::connect(uri_for("postgres+index"));
  auto r = probe::exec(c.get(),
                       "SELECT count(*) FROM dlock_index_waiters WHERE name = $1 AND expires_at > clock_timestamp()",
                       {dlock::sql::bytes{name}});
  return std::stoll(r.rows.at(0).at(0).value());
}

TEST(index_fair, declared_only_when_enabled_and_index_only) {
  EXPECT_FALSE(dlock::open(uri_for("postgres+index"))->caps().has(dlock::capability::fair));
  EXPECT_TRUE(dlock::open(uri_for("postgres+index", "fair=true"))->caps().has(dlock::capability::fair));
  for (const auto* scheme : {"postgres+forupdate", "postgres+version"}) {
    std::error_code ec;
    EXPECT_FALSE(dlock::default_registry().open(uri_for(scheme, "fair=true"), {}, ec)) << scheme;
    EXPECT_EQ(ec, dlock::errc::invalid_uri) << scheme;
  }
}

TEST(index_fair, waiters_are_granted_in_arrival_order) {
  auto be = dlock::open(uri_for("postgres+index", "fair=true&ttl=5s"));
  const auto name = unique_name("fifo");
  EXPECT_EQ(dlock::sql::testing::grant_order_of_queued_waiters(*be, name, 5, [&] { return queued(name); }),
            (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(index_fair, try_acquire_refused_while_queued_and_a_dead_waiter_leaves_after_its_ttl) {
  auto be = dlock::open(uri_for("postgres+index", "fair=true"));
  const auto name = unique_name("deadwaiter");
  {  // another process queued, then died: its row expires on the server clock
    auto c = probe::connect(uri_for("postgres+index"));
    probe::exec(c.get(),
                "INSERT INTO dlock_index_waiters (name, owner, expires_at)"
                " VALUES ($1, 'dead-waiter', clock_timestamp() + interval '1500 milliseconds')",
                {dlock::sql::bytes{name}});
  }
  auto lock = be->make_lock(name);
  EXPECT_FALSE(lock->try_acquire()) << "the lock is free, but a live waiter queues before us";
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(lock->try_acquire()); }))
      << "the dead waiter's row never expired";
}

TEST(index_fair, a_waiter_that_gives_up_leaves_the_queue_and_reentry_is_not_queued) {
  auto be = dlock::open(uri_for("postgres+index", "fair=true&ttl=10s"));
  const auto name = unique_name("giveup");
  auto holder = be->make_lock(name);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  auto waiter = be->make_lock(name);
  EXPECT_FALSE(waiter->try_acquire_for(300ms));
  EXPECT_EQ(queued(name), 0) << "a waiter that timed out must leave the waiters table";
  // A second waiter queues; the holder's re-entry still succeeds (it is not a newcomer).
  auto second = be->make_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return static_cast<bool>(second->try_acquire_for(30s)); });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  auto inner = holder->try_acquire();
  EXPECT_TRUE(inner) << "re-entry by the holder must not wait behind the queue";
  inner.release();
  held.release();
  EXPECT_TRUE(waiting.get());
}

TEST(advisory, not_reentrant_on_one_backend) {
  auto be = dlock::open(uri_for("postgres+advisory"));
  const auto name = unique_name("stack");
  auto lock = be->make_lock(name);
  auto held = lock->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(lock->try_acquire()) << "advisory locks stack per session: a second grant leaked through";
  held.release();
  EXPECT_FALSE(probe::held_on_server(uri_for("postgres+advisory"), name));
}

// The pool is sql_common's, the same for every SQL scheme. Holders share sessions (max_dedicated/2
// of them): with max_connections=2 (max_dedicated=1) a second holder of another name shares the
// first one's session. A caller that must wait on a session of its own (the name is held by
// another process) waits for one within its own deadline, then fails with backend_unavailable
// naming the bound; a session given back meanwhile lets a waiting caller through.
TEST(pool, holders_share_and_a_waiter_beyond_the_bound_waits_its_deadline_then_names_it) {
  auto be = dlock::open(uri_for("postgres+advisory", "max_connections=2&checkout_timeout=600ms"));
  auto other_process = dlock::open(uri_for("postgres+advisory"));
  auto full = dlock::sql::testing::pool_bound_holds_its_deadline(*be, *other_process);
  ASSERT_TRUE(full.held && full.elsewhere);

  auto waiter = std::async(std::launch::async, [&] { return be->make_lock(full.contended)->try_acquire_for(20s); });
  std::this_thread::sleep_for(300ms);
  full.held.release();
  full.shared.release();  // the shared session goes back: the waiter gets a session of its own
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "granted while another process held the lock";
  full.elsewhere.release();
  EXPECT_TRUE(waiter.get()) << "the waiter never got the lock once its session came and the holder left";
}

// A caller waiting for a session of its own in a full pool is waiting in its acquire: a stop
// request ends that wait too (operation_canceled, no lease), long before its deadline, and leaves
// the pool as it was: the session given back later goes to the next caller.
TEST(pool, a_stop_request_ends_a_wait_for_a_session) {
  auto be = dlock::open(uri_for("postgres+advisory", "max_connections=2&checkout_timeout=600ms"));
  auto other_process = dlock::open(uri_for("postgres+advisory"));
  auto full = dlock::sql::testing::pool_bound_holds_its_deadline(*be, *other_process);
  ASSERT_TRUE(full.held && full.elsewhere);

  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto l = be->make_lock(full.contended)->try_acquire_for(30s, stop.get_token(), ec);
    return std::pair{std::move(l), ec};
  });
  std::this_thread::sleep_for(300ms);  // lets it reach the pool's wait (a stop before ends it too)
  const auto asked = std::chrono::steady_clock::now();
  stop.request_stop();
  ASSERT_EQ(waiter.wait_for(3s), std::future_status::ready) << "the stop did not end the wait for a session";
  std::cout << "[ figures ] the wait for a session ended "
            << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count()
            << " ms after the stop request\n";
  auto [got, ec] = waiter.get();
  EXPECT_FALSE(got);
  EXPECT_EQ(ec, std::make_error_code(std::errc::operation_canceled)) << ec.message();

  full.elsewhere.release();
  full.held.release();
  full.shared.release();
  EXPECT_TRUE(be->make_lock(full.contended)->try_acquire_for(5s)) << "the pool did not recover after the stop";
}

// 128 concurrent holders on few server sessions. Each thread holds a distinct name at
// the same time as all the others; the sessions of this backend (by its application_name) stay
// within the shared bound (the default max_dedicated=32: 16 shared sessions).
TEST(advisory, many_concurrent_holders_share_at_most_16_server_sessions) {
  const auto app = unique_name("dlock-share");
  auto be = dlock::open(uri_for("postgres+advisory", "ttl=30s&application_name=" + app));
  constexpr int holders = 128;
  std::vector<std::string> names;
  for (int i = 0; i < holders; ++i) names.push_back(unique_name("many-" + std::to_string(i)));
  int sessions = 0, held_on_server = 0;
  const auto held = dlock::sql::testing::hold_all_at_once(*be, names, [&] {
    auto admin = probe::connect(uri_for("postgres+advisory"));
    sessions = std::stoi(
        *probe::exec(admin.get(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app + "'")
             .rows.at(0)
             .at(0));
    for (const auto& n : names) held_on_server += probe::held_on_server(uri_for("postgres+advisory"), n) ? 1 : 0;
  });
  EXPECT_EQ(held.granted, holders) << held.failed << " holders failed";
  EXPECT_EQ(held_on_server, holders);
  EXPECT_LE(sessions, 16) << "the holders did not share sessions";
  EXPECT_GE(sessions, 1);
  std::cout << "[ figures ] " << holders << " concurrent advisory holders on " << sessions << " server sessions\n";
}

// Sharing a session must never let two leases of one process both hold one name (a session
// that holds an advisory key is granted it again: the keys stack). Many threads on one name with
// a single shared session: a read-modify-write counter and an overlap detector.
TEST(advisory, one_name_stays_mutually_exclusive_on_a_shared_session) {
  auto be = dlock::open(uri_for("postgres+advisory", "max_connections=3"));  // max_dedicated 2: 1 shared
  const auto name = unique_name("mutex");
  const auto result = dlock::sql::testing::hammer_one_name(*be, name, 16, 60);
  EXPECT_EQ(result.overlaps, 0) << "two leases held one name at once";
  EXPECT_EQ(result.errors, 0);
  EXPECT_EQ(result.counter, result.expected) << "updates were lost";
  EXPECT_FALSE(probe::held_on_server(uri_for("postgres+advisory"), name));
}

// A lease outlives its lock and backend: its release still runs on its session and frees the key
// in the key guard (which the lease keeps alive).
TEST(advisory, a_lease_outlives_its_lock_and_backend) {
  const auto name = unique_name("outlive");
  dlock::lease held;
  {
    auto be = dlock::open(uri_for("postgres+advisory"));
    held = be->make_lock(name)->try_acquire();
  }
  ASSERT_TRUE(held);
  EXPECT_TRUE(probe::held_on_server(uri_for("postgres+advisory"), name));
  held.release();
  EXPECT_FALSE(probe::held_on_server(uri_for("postgres+advisory"), name));
}

// A shared session killed on the server frees every lock on it: every lease on it is told.
TEST(advisory, a_killed_shared_session_reports_every_lease_on_it_lost) {
  const auto app = unique_name("dlock-kill-shared");
  auto be = dlock::open(uri_for("postgres+advisory", "max_connections=3&ttl=30s&application_name=" + app));
  std::vector<std::string> names;
  std::vector<dlock::lease> leases;
  ASSERT_NO_FATAL_FAILURE(dlock::sql::testing::hold_four_names(*be, names, leases));
  auto admin = probe::connect(uri_for("postgres+advisory"));
  const auto sessions =
      probe::exec(admin.get(), "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND pid IN"
                               " (SELECT pid FROM pg_stat_activity WHERE application_name = '" +
                                   app + "')");
  ASSERT_EQ(sessions.rows.at(0).at(0), "1") << "the four leases were expected on one shared session";
  ASSERT_TRUE(terminate_sessions_of(uri_for("postgres+advisory"), app));
  dlock::sql::testing::expect_each_lease_lost_and_its_name_free(*be, names, leases, 10s);
}

TEST(open, wrong_password_is_authentication_failed_and_never_shown) {
  auto uri = uri_for("postgres+index");
  const std::string secret = "dlock-secret";
  auto pos = uri.find(secret);
  ASSERT_NE(pos, std::string::npos) << "expected the launcher's credentials in DLOCK_POSTGRES_URI";
  uri.replace(pos, secret.size(), "Wr0ng-Pa55");
  for (const auto& scheme : all_schemes) {
    auto u = scheme + uri.substr(uri.find("://"));
    std::error_code ec;
    auto be = dlock::default_registry().open(u, {}, ec);
    EXPECT_FALSE(be);
    EXPECT_EQ(ec, dlock::errc::authentication_failed) << scheme << ": " << dlock::last_error_message();
    EXPECT_EQ(dlock::last_error_message().find("Wr0ng-Pa55"), std::string::npos) << dlock::last_error_message();
  }
}

TEST(open, unknown_database_and_unreachable_server) {
  auto uri = uri_for("postgres+index");
  auto slash = uri.rfind('/');
  std::error_code ec;
  auto be = dlock::default_registry().open(uri.substr(0, slash) + "/no_such_db", {}, ec);
  EXPECT_FALSE(be);
  EXPECT_EQ(ec, dlock::errc::backend_error);
  EXPECT_NE(dlock::last_error_message().find("no_such_db"), std::string::npos) << dlock::last_error_message();
  be = dlock::default_registry().open("postgres+index://dlock:dlock-secret@127.0.0.1:1/dlock?connect_timeout=2s", {},
                                      ec);
  EXPECT_FALSE(be);
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << dlock::last_error_message();
  EXPECT_EQ(dlock::last_error_message().find("dlock-secret"), std::string::npos);
}

TEST(open, table_and_schema_must_be_identifiers) {
  std::error_code ec;
  auto be = dlock::default_registry().open(uri_for("postgres+index", "table=x%22%3B%20drop"), {}, ec);
  EXPECT_FALSE(be);
  EXPECT_EQ(ec, dlock::errc::invalid_uri);
}

// Six processes (dlock_sql_race_worker) open a new schema and table at the same instant, each
// running the DDL, then take turns on one lock: every open succeeds and the lock still excludes.
class schema_race : public ::testing::TestWithParam<std::string> {};
TEST_P(schema_race, creation_races_from_several_processes) {
  const auto suffix = dlock::spi::random_token().substr(0, 10);
  const auto scheme = GetParam().substr(0, GetParam().find('?'));
  const auto extra =
      GetParam().find('?') == std::string::npos ? std::string() : "&" + GetParam().substr(GetParam().find('?') + 1);
  const auto uri =
      uri_for(scheme, "schema=race_" + suffix + "&table=locks_" + suffix + "&ttl=10s&poll=1ms..20ms" + extra);
  dlock::sql::testing::expect_schema_race(uri, unique_name("race"));
  auto admin = probe::connect(uri);
  probe::exec(admin.get(), "DROP SCHEMA \"race_" + suffix + "\" CASCADE");
}
INSTANTIATE_TEST_SUITE_P(pg, schema_race,
                         ::testing::Values("postgres+index", "postgres+index?fair=true", "postgres+forupdate",
                                           "postgres+version"),
                         [](const auto& info) {
                           auto s = info.param.substr(info.param.find('+') + 1);
                           return s.find('?') == std::string::npos ? s : s.substr(0, s.find('?')) + "_fair";
                         });

// ---- the sweeper (backend::sweep_expired), against rows another tool wrote with raw SQL
using dlock::sql::bytes;

std::int64_t count_where(PGconn* c, const std::string& table, const std::string& where,
                         std::vector<dlock::sql::param> params) {
  auto r = probe::exec(c, "SELECT count(*) FROM " + table + " WHERE " + where, std::move(params));
  return std::stoll(r.rows.at(0).at(0).value());
}

// Rows another tool wrote: INSERT INTO `table` `rows` (its columns and VALUES).
void insert_rows(PGconn* c, const std::string& table, const std::string& rows, std::vector<dlock::sql::param> params) {
  probe::exec(c, "INSERT INTO " + table + " " + rows, std::move(params));
}

// A table of a sweep test's own, "<prefix>_<random>": a backend of `scheme` on it (with `query`)
// and a raw connection that writes rows into it as another tool would.
struct sweep_table {
  std::string table;
  std::shared_ptr<dlock::backend> be;
  dlock::pg::pgconn_ptr admin;
};

sweep_table open_sweep_table(const std::string& prefix, const std::string& scheme, const std::string& query) {
  auto table = prefix + "_" + dlock::spi::random_token().substr(0, 10);
  auto be = dlock::open(uri_for(scheme, "table=" + table + "&" + query));
  return {std::move(table), std::move(be), probe::connect(uri_for(scheme))};
}

TEST(sweep, index_deletes_exactly_the_expired_rows_other_tools_wrote) {
  auto [table, be, admin] = open_sweep_table("sweep", "postgres+index", "ttl=30s");
  EXPECT_EQ(be->sweep_target(), "\"" + table + "\"");
  EXPECT_EQ(be->sweep_expired(), 0u) << "an empty table has nothing to sweep";
  const auto p = unique_name("sw");
  insert_rows(admin.get(), table,
              "(name, owner, hold_count, expires_at, fence) VALUES"
              " ($1, 'tool-a', 1, clock_timestamp() - interval '1 second', 1),"
              " ($2, 'tool-b', 3, clock_timestamp() - interval '1 hour', 2),"
              " ($3, 'tool-a', 1, '2000-01-01', 3),"
              " ($4, 'tool-c', 1, clock_timestamp() + interval '1 hour', 4)",
              {bytes{p + "-old1"}, bytes{p + "-old2"}, bytes{p + "-old3"}, bytes{p + "-live-other"}});
  auto ours = be->make_lock(p + "-ours")->try_acquire();
  ASSERT_TRUE(ours);
  EXPECT_EQ(be->sweep_expired(), 3u);
  EXPECT_EQ(count_where(admin.get(), table, "name IN ($1, $2, $3)",
                        {bytes{p + "-old1"}, bytes{p + "-old2"}, bytes{p + "-old3"}}),
            0);
  EXPECT_EQ(count_where(admin.get(), table, "name = $1", {bytes{p + "-live-other"}}), 1)
      << "another owner's live row was swept";
  EXPECT_EQ(count_where(admin.get(), table, "name = $1", {bytes{p + "-ours"}}), 1) << "our live row was swept";
  EXPECT_EQ(be->sweep_expired(), 0u);
  EXPECT_FALSE(be->make_lock(p + "-live-other")->try_acquire()) << "the live row still excludes";
  ours.release();
  probe::exec(admin.get(), "DROP TABLE " + table);
}

TEST(sweep, index_fair_also_deletes_dead_waiters_only) {
  auto [table, be, admin] = open_sweep_table("sweepf", "postgres+index", "fair=true&ttl=30s");
  EXPECT_EQ(be->sweep_target(), "\"" + table + "\" and \"" + table + "_waiters\"");
  const auto p = unique_name("swf");
  insert_rows(admin.get(), table + "_waiters",
              "(name, owner, expires_at) VALUES"
              " ($1, 'dead-1', clock_timestamp() - interval '1 second'),"
              " ($1, 'dead-2', clock_timestamp() - interval '1 second'),"
              " ($1, 'alive', clock_timestamp() + interval '1 hour')",
              {bytes{p}});
  insert_rows(admin.get(), table,
              "(name, owner, hold_count, expires_at, fence)"
              " VALUES ($1, 'x', 1, clock_timestamp() - interval '1 second', 1)",
              {bytes{p + "-old"}});
  EXPECT_EQ(be->sweep_expired(), 3u) << "1 expired lock row + 2 dead waiters";
  EXPECT_EQ(count_where(admin.get(), table + "_waiters", "name = $1", {bytes{p}}), 1);
  EXPECT_EQ(count_where(admin.get(), table + "_waiters", "name = $1 AND owner = 'alive'", {bytes{p}}), 1);
  probe::exec(admin.get(), "DROP TABLE " + table + ", " + table + "_waiters");
}

// Version rows carry the fencing token: expired grants are freed, rows and versions kept.
TEST(sweep, version_frees_expired_grants_but_keeps_rows_and_versions) {
  auto [table, be, admin] = open_sweep_table("sweepv", "postgres+version", "ttl=30s");
  const auto p = unique_name("swv");
  insert_rows(admin.get(), table,
              "(name, owner, version, expires_at) VALUES"
              " ($1, 'tool', 7, clock_timestamp() - interval '1 second'),"
              " ($2, 'tool', 3, clock_timestamp() + interval '1 hour'), ($3, NULL, 5, NULL)",
              {bytes{p + "-expired"}, bytes{p + "-live"}, bytes{p + "-free"}});
  EXPECT_EQ(be->sweep_expired(), 1u);
  EXPECT_EQ(count_where(admin.get(), table, "name = $1 AND owner IS NULL AND version = 7", {bytes{p + "-expired"}}), 1);
  EXPECT_EQ(count_where(admin.get(), table, "name = $1 AND owner = 'tool' AND version = 3", {bytes{p + "-live"}}), 1);
  auto next = be->make_lock(p + "-expired")->try_acquire();
  ASSERT_TRUE(next);
  EXPECT_EQ(*next.fencing_token(), 8u) << "the version continued after the sweep";
  EXPECT_EQ(be->sweep_expired(), 0u);
  next.release();
  probe::exec(admin.get(), "DROP TABLE " + table);
}

TEST(sweep, session_schemes_have_nothing_to_sweep) {
  for (const auto& scheme : session_schemes) {
    auto be = dlock::open(uri_for(scheme));
    EXPECT_EQ(be->sweep_target(), "") << scheme;
    EXPECT_EQ(be->sweep_expired(), 0u) << scheme;
  }
}

TEST(index, create_table_false_with_a_missing_table_is_a_clear_error) {
  std::error_code ec;
  auto be = dlock::default_registry().open(
      uri_for("postgres+index", "create_table=false&table=absent_" + dlock::spi::random_token().substr(0, 8)), {}, ec);
  ASSERT_TRUE(be) << dlock::last_error_message();
  auto l = be->make_lock("x")->try_acquire(ec);
  EXPECT_FALSE(l);
  EXPECT_EQ(ec, dlock::errc::backend_error);
  EXPECT_NE(dlock::last_error_message().find("42P01"), std::string::npos) << dlock::last_error_message();
}

}  // namespace
