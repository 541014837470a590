// postgres+advisory's reader-writer lock and semaphore against a real server (DLOCK_POSTGRES_URI):
// readers together across sessions, a writer alone, PostgreSQL's own writer preference and the
// same through dlock's waiting path, holds freed with a terminated session or a SIGKILLed client,
// a semaphore of N never N+1 from many threads, and slot keys apart from the mutex's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "advisory_primitives.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/permit_census.hpp"
#include "dlock_test/support.hpp"
#include "partition.hpp"
#include "pg_probe.hpp"
#include "shared_sessions.hpp"

using namespace std::chrono_literals;
namespace probe = dlock::pg::testing;

namespace {

using dlock::testing::eventually;
using dlock::testing::fires_within;
using dlock::testing::unique_name;

std::string advisory_uri(const std::string& query = "ttl=5s") {
  return dlock::testing::with_query(
      dlock::testing::with_scheme(dlock::testing::server_uri("DLOCK_POSTGRES_URI"), "postgres+advisory"), query);
}

// One shared session (max_dedicated / 2) and two of its own: every lease of the process that may
// share a session shares the same one, where PostgreSQL would stack a grant on the session's own
// locks (shared on exclusive, exclusive on shared, shared past a queued writer) if dlock let it.
const char* const one_shared_session = "ttl=5s&max_dedicated=3";

std::size_t count(const std::vector<probe::advisory_row>& rows, const std::string& mode, bool granted) {
  return static_cast<std::size_t>(
      std::count_if(rows.begin(), rows.end(), [&](const auto& r) { return r.mode == mode && r.granted == granted; }));
}

bool writer_waits(const std::string& name) {
  return count(probe::advisory_rows(advisory_uri(), name), "ExclusiveLock", false) > 0;
}

TEST(pg_advisory_rw, readers_hold_together_across_sessions) {
  const auto name = unique_name("rw-readers");
  auto a = dlock::open(advisory_uri(one_shared_session)), b = dlock::open(advisory_uri()),
       c = dlock::open(advisory_uri());
  auto ra = a->make_rw_lock(name), rb = b->make_rw_lock(name);
  auto r1 = ra->try_acquire_read(), r2 = rb->try_acquire_read();
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  const auto rows = probe::advisory_rows(advisory_uri(), name);
  EXPECT_EQ(count(rows, "ShareLock", true), 2u);
  std::set<int> pids;
  for (const auto& r : rows) pids.insert(r.pid);
  EXPECT_EQ(pids.size(), 2u) << "two backends, two server sessions";
  // A reader of the same process as r1 too (beside it, on a session of its own).
  auto r3 = a->make_rw_lock(name)->try_acquire_read();
  EXPECT_TRUE(r3);
  auto writer = c->make_rw_lock(name);
  EXPECT_FALSE(writer->try_acquire_write());
  EXPECT_FALSE(c->make_lock(name)->try_acquire()) << "the mutex of the same name is the write side";
  r1.release();
  r3.release();
  EXPECT_FALSE(writer->try_acquire_write());
  r2.release();
  EXPECT_TRUE(writer->try_acquire_write());
}

TEST(pg_advisory_rw, a_writer_holds_alone_even_within_its_process) {
  const auto name = unique_name("rw-writer");
  auto a = dlock::open(advisory_uri(one_shared_session)), b = dlock::open(advisory_uri());
  auto w = a->make_rw_lock(name)->try_acquire_write();
  ASSERT_TRUE(w);
  EXPECT_EQ(count(probe::advisory_rows(advisory_uri(), name), "ExclusiveLock", true), 1u);
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_read());
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_write());
  // The same process: its shared session holds the key exclusively, and PostgreSQL would grant
  // that session a shared lock on it at once; dlock asks on another session, which waits.
  EXPECT_FALSE(a->make_rw_lock(name)->try_acquire_read());
  EXPECT_FALSE(a->make_rw_lock(name)->try_acquire_read_for(300ms));
  EXPECT_FALSE(a->make_lock(name)->try_acquire());
  w.release();
  auto r = a->make_rw_lock(name)->try_acquire_read();
  EXPECT_TRUE(r);
  // And the other way round: a writer of the process holding a read is refused, not stacked.
  EXPECT_FALSE(a->make_rw_lock(name)->try_acquire_write());
  EXPECT_FALSE(a->make_rw_lock(name)->try_acquire_write_for(300ms));
}

// The server itself, raw libpq: a writer blocked behind a reader makes a new shared request wait
// (LockAcquire checks the wait queue's mask, not only the granted modes).
TEST(pg_advisory_rw, the_server_queues_a_new_reader_behind_a_waiting_writer) {
  const auto name = unique_name("rw-server-queue");
  const std::int64_t key = dlock::spi::sha256_int64(name);
  auto reader = probe::connect(advisory_uri()), writer = probe::connect(advisory_uri()),
       trier = probe::connect(advisory_uri()), late = probe::connect(advisory_uri());
  probe::exec(reader.get(), "SELECT pg_advisory_lock_shared($1::bigint)", {key});
  std::atomic<int> order{0}, writer_at{0}, late_at{0};
  std::thread w([&] {
    probe::exec(writer.get(), "SELECT pg_advisory_lock($1::bigint)", {key});
    writer_at = ++order;
  });
  ASSERT_TRUE(eventually([&] { return writer_waits(name); }));
  EXPECT_EQ(*probe::exec(trier.get(), "SELECT pg_try_advisory_lock_shared($1::bigint)", {key}).rows[0][0], "f");
  std::thread r([&] {
    probe::exec(late.get(), "SELECT pg_advisory_lock_shared($1::bigint)", {key});
    late_at = ++order;
  });
  ASSERT_TRUE(eventually([&] { return count(probe::advisory_rows(advisory_uri(), name), "ShareLock", false) == 1; }));
  probe::exec(reader.get(), "SELECT pg_advisory_unlock_shared($1::bigint)", {key});
  w.join();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(late_at.load(), 0) << "the late reader got in while the writer held";
  probe::exec(writer.get(), "SELECT pg_advisory_unlock($1::bigint)", {key});
  r.join();
  EXPECT_EQ(writer_at.load(), 1);
  EXPECT_EQ(late_at.load(), 2);
}

// The same through dlock: a writer waiting in acquire_write holds back readers arriving after it,
// from another process's pool and from the reader's own process (whose shared session already
// holds the key in shared mode), both their tries and their waits.
TEST(pg_advisory_rw, a_waiting_writer_holds_back_new_readers_through_dlock) {
  const auto name = unique_name("rw-writer-preferred");
  auto a = dlock::open(advisory_uri(one_shared_session)), b = dlock::open(advisory_uri()),
       c = dlock::open(advisory_uri());
  EXPECT_TRUE(a->rw_caps().has(dlock::capability::writer_preferred));
  auto holder = a->make_rw_lock(name);
  auto held = holder->acquire_read();
  std::atomic<int> order{0}, writer_at{0}, other_at{0}, same_at{0};
  std::thread w([&] {
    auto l = b->make_rw_lock(name)->acquire_write();
    writer_at = ++order;
    std::this_thread::sleep_for(200ms);
    l.release();
  });
  ASSERT_TRUE(eventually([&] { return writer_waits(name); }));
  EXPECT_FALSE(c->make_rw_lock(name)->try_acquire_read()) << "another process's reader got in past the waiting writer";
  EXPECT_FALSE(a->make_rw_lock(name)->try_acquire_read())
      << "the holder's process's reader got in past the waiting writer";
  EXPECT_FALSE(holder->try_acquire_read_for(200ms));
  std::thread other([&] {
    auto l = c->make_rw_lock(name)->acquire_read();
    other_at = ++order;
  });
  std::thread same([&] {
    auto l = a->make_rw_lock(name)->try_acquire_read_for(20s);
    if (l) same_at = ++order;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(order.load(), 0);
  held.release();
  w.join();
  other.join();
  same.join();
  EXPECT_EQ(writer_at.load(), 1);
  EXPECT_GT(other_at.load(), 1);
  EXPECT_GT(same_at.load(), 1);
}

TEST(pg_advisory_primitives, a_terminated_session_frees_read_hold_and_permit_and_says_lost) {
  const auto name = unique_name("terminated");
  const auto permits = name + "-permits";  // a semaphore never holds beside a rw lock of its name
  auto a = dlock::open(advisory_uri()), b = dlock::open(advisory_uri());
  auto reading = a->make_rw_lock(name)->acquire_read();
  auto permit = a->make_semaphore(permits, 1)->try_acquire();
  ASSERT_TRUE(reading);
  ASSERT_TRUE(permit);
  auto sem_b = b->make_semaphore(permits, 1);
  auto rw_b = b->make_rw_lock(name);
  EXPECT_FALSE(sem_b->try_acquire());
  EXPECT_FALSE(rw_b->try_acquire_write());
  std::set<int> pids;
  for (const auto& r : probe::advisory_rows(advisory_uri(), name)) pids.insert(r.pid);
  for (const auto& r : probe::slot_rows(advisory_uri(), permits, 1)) pids.insert(r.pid);
  ASSERT_FALSE(pids.empty());
  for (int pid : pids) probe::terminate(advisory_uri(), pid);
  EXPECT_TRUE(fires_within(reading.lost_token(), 5s));
  EXPECT_TRUE(fires_within(permit.lost_token(), 5s));
  dlock::lease w, p;
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(w = rw_b->try_acquire_write()); }));
  w.release();
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(p = sem_b->try_acquire()); }));
  std::error_code ec;
  reading.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  permit.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

// The conformance hooks' probes (pg_probe: held_on_server, break_lock) see and break a read hold
// among several, and a semaphore's permits.
TEST(pg_advisory_primitives, the_probes_see_and_break_readers_and_permits) {
  const auto name = unique_name("probes");
  auto a = dlock::open(advisory_uri()), b = dlock::open(advisory_uri());
  auto permit = a->make_semaphore(name, 7)->try_acquire(2);
  ASSERT_TRUE(permit);
  EXPECT_TRUE(probe::held_on_server(advisory_uri(), name));
  EXPECT_GT(probe::break_lock(advisory_uri(), name), 0);
  EXPECT_TRUE(fires_within(permit.lost_token(), 5s));
  EXPECT_TRUE(eventually([&] { return !probe::held_on_server(advisory_uri(), name); }));
  const auto other = unique_name("probes-rw");
  auto r1 = a->make_rw_lock(other)->try_acquire_read(), r2 = b->make_rw_lock(other)->try_acquire_read();
  ASSERT_TRUE(r1 && r2);
  EXPECT_TRUE(probe::held_on_server(advisory_uri(), other));
  probe::break_lock(advisory_uri(), other);
  EXPECT_TRUE(fires_within(r1.lost_token(), 5s));
  EXPECT_TRUE(fires_within(r2.lost_token(), 5s));
}

TEST(pg_advisory_primitives, a_sigkilled_client_frees_its_read_hold_and_permit) {
  const auto name = unique_name("sigkill");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const std::string uri = advisory_uri();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::execl(DLOCK_PG_PRIMITIVE_HOLDER, DLOCK_PG_PRIMITIVE_HOLDER, uri.c_str(), name.c_str(), "1", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  char buf[8] = {};
  const auto n = ::read(out[0], buf, 4);
  ::close(out[0]);
  ASSERT_EQ(n, 4) << "the holder did not start";
  ASSERT_EQ(std::string(buf, 4), "held");
  auto b = dlock::open(advisory_uri());
  auto rw = b->make_rw_lock(name);
  auto sem = b->make_semaphore(name + "-permits", 1);  // the holder's semaphore (primitive_holder.cpp)
  EXPECT_FALSE(rw->try_acquire_write());
  EXPECT_FALSE(sem->try_acquire());
  EXPECT_TRUE(rw->try_acquire_read()) << "readers together across processes";
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  dlock::lease w, p;
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(w = rw->try_acquire_write()); }));
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(p = sem->try_acquire()); }));
}

TEST(pg_advisory_semaphore, never_more_than_n_at_once_and_reaches_n) {
  const auto name = unique_name("sem-n");
  constexpr std::uint32_t n = 3;
  auto a = dlock::open(advisory_uri("ttl=10s&poll=1ms..20ms")), b = dlock::open(advisory_uri("ttl=10s&poll=1ms..20ms"));
  dlock::testing::permit_census census(static_cast<int>(n));
  std::atomic<int> failures{0};
  std::atomic<std::size_t> most_on_server{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto sem = (t % 2 ? a : b)->make_semaphore(name, n);
      for (int i = 0; i < 25; ++i) {
        auto p = sem->try_acquire_for(20s);
        if (!p) {
          ++failures;
          continue;
        }
        if (i % 8 == 0) {
          const auto held = probe::slot_rows(advisory_uri(), name, n).size();
          auto s = most_on_server.load();
          while (held > s && !most_on_server.compare_exchange_weak(s, held)) {
          }
        }
        census.hold(5ms);
        p.release();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(census.over(), 0) << "more than " << n << " permits held at once";
  EXPECT_EQ(census.most(), static_cast<int>(n)) << "never reached N";
  EXPECT_LE(most_on_server.load(), n);
  EXPECT_TRUE(probe::slot_rows(advisory_uri(), name, n).empty());
}

TEST(pg_advisory_semaphore, takes_k_permits_together_or_none) {
  const auto name = unique_name("sem-k");
  auto a = dlock::open(advisory_uri(one_shared_session)), b = dlock::open(advisory_uri());
  auto sa = a->make_semaphore(name, 5), sb = b->make_semaphore(name, 5);
  auto three = sa->try_acquire(3);
  ASSERT_TRUE(three);
  EXPECT_EQ(probe::slot_rows(advisory_uri(), name, 5).size(), 3u);
  EXPECT_FALSE(sb->try_acquire(3));
  EXPECT_EQ(probe::slot_rows(advisory_uri(), name, 5).size(), 3u) << "a partial take was not given back";
  EXPECT_FALSE(sa->try_acquire(3)) << "the same process: its own slots are not taken twice";
  auto two = sa->try_acquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(sb->try_acquire());
  ASSERT_TRUE(three.fencing_token() && two.fencing_token());
  EXPECT_GT(*two.fencing_token(), *three.fencing_token());
  three.release();
  EXPECT_EQ(probe::slot_rows(advisory_uri(), name, 5).size(), 2u);
  EXPECT_TRUE(sb->try_acquire(3));
}

TEST(pg_advisory_semaphore, slot_keys_and_marks_never_meet_the_mutex_or_rw_keys) {
  const auto name = unique_name("sem-keys");
  std::set<std::int64_t> keys{dlock::spi::sha256_int64(name)};
  for (std::uint32_t i = 0; i < 1000; ++i) keys.insert(dlock::pg::semaphore_slot_key(name, i));
  const auto k = dlock::pg::advisory_key::of(name);
  keys.insert(k.semaphore_mark);
  keys.insert(k.writer_mark);
  EXPECT_EQ(keys.size(), 1003u);
  // On the server they are apart in any case: the slots and the marks are two-int4 keys
  // (objsubid 2), the mutex and the rw lock one int8 key (objsubid 1). A semaphore of one name and
  // the mutex and rw lock of another hold together.
  auto a = dlock::open(advisory_uri()), b = dlock::open(advisory_uri());
  auto mutex = a->make_lock(name + "-mutex")->try_acquire();
  ASSERT_TRUE(mutex);
  auto all = b->make_semaphore(name, 4)->try_acquire(4);
  ASSERT_TRUE(all);
  EXPECT_EQ(probe::slot_rows(advisory_uri(), name, 4).size(), 4u);
  EXPECT_EQ(probe::advisory_rows(advisory_uri(), name + "-mutex").size(), 1u);
  EXPECT_TRUE(probe::advisory_rows(advisory_uri(), name).empty()) << "a semaphore takes no int8 key";
  mutex.release();
  auto writing_elsewhere = a->make_rw_lock(name + "-other")->try_acquire_write();
  EXPECT_TRUE(writing_elsewhere);
}

// `refused` (its error in `ec`) was refused as a name conflict with what holds the name, `in_use_as`.
void expect_name_conflict(const dlock::lease& refused, const std::error_code& ec, const std::string& in_use_as) {
  EXPECT_FALSE(refused);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
  EXPECT_NE(dlock::last_error_message().find(in_use_as), std::string::npos) << dlock::last_error_message();
}

// One name, one lock: a semaphore and a mutex or rw lock of one name refuse each other with
// name_conflict, across processes' sessions and within one process, where both would otherwise
// share its one shared session (whose own locks the probes could not see).
TEST(pg_advisory_one_name, a_semaphore_and_a_lock_refuse_each_other_on_one_shared_session) {
  for (const char* query : {one_shared_session, "ttl=5s"}) {
    SCOPED_TRACE(query);
    const auto name = unique_name("one-name-session");
    auto a = dlock::open(advisory_uri(query));
    auto b = std::string(query) == one_shared_session ? a : dlock::open(advisory_uri(query));
    std::error_code ec;
    {
      auto mutex = a->make_lock(name)->try_acquire();
      ASSERT_TRUE(mutex);
      expect_name_conflict(b->make_semaphore(name, 3)->try_acquire(ec), ec, "in use as a mutex");
      EXPECT_TRUE(probe::slot_rows(advisory_uri(), name, 3).empty()) << "the refused semaphore left slots behind";
    }
    for (auto side : {dlock::access::write, dlock::access::read}) {
      auto held = a->make_rw_lock(name)->try_acquire(side);
      ASSERT_TRUE(held);
      expect_name_conflict(b->make_semaphore(name, 3)->try_acquire(ec), ec, "in use as a reader-writer lock");
    }
    {
      auto permit = a->make_semaphore(name, 3)->try_acquire();
      ASSERT_TRUE(permit);
      for (int k = 0; k < 3; ++k) {
        dlock::lease l = k == 0   ? b->make_lock(name)->try_acquire(ec)
                         : k == 1 ? b->make_rw_lock(name)->try_acquire_read(ec)
                                  : b->make_rw_lock(name)->try_acquire_write(ec);
        expect_name_conflict(l, ec, "in use as a semaphore");
      }
      EXPECT_TRUE(probe::advisory_rows(advisory_uri(), name).empty()) << "a refused lock left its key behind";
      EXPECT_EQ(probe::slot_rows(advisory_uri(), name, 3).size(), 1u);
    }
    EXPECT_TRUE(b->make_lock(name)->try_acquire()) << "the name is free again once the permit is released";
  }
}

// Acquirers of one kind probe the other kind's key with an exclusive try, which can fail on
// another acquirer's probe at the same instant; pg_locks then tells them apart. Many readers of
// one name and many acquirers of one semaphore are never refused as a conflict.
TEST(pg_advisory_one_name, racing_acquirers_of_one_kind_never_refuse_each_other) {
  const auto readers = unique_name("one-name-readers"), permits = unique_name("one-name-permits");
  auto a = dlock::open(advisory_uri()), b = dlock::open(advisory_uri());
  std::atomic<int> conflicts{0}, granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto backend = t % 2 ? a : b;
      auto rw = backend->make_rw_lock(readers);
      auto sem = backend->make_semaphore(permits, 8);
      for (int i = 0; i < 60; ++i) {
        std::error_code ec;
        auto l = t < 4 ? rw->try_acquire_read_for(5s, ec) : sem->try_acquire_for(5s, ec);
        if (ec == dlock::errc::name_conflict) ++conflicts;
        if (l) ++granted;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(conflicts.load(), 0);
  EXPECT_EQ(granted.load(), 8 * 60);
}

// Two kinds racing for one name: conformance OneName.AMutexAndASemaphoreRacingForOneNameAreNeverBothGranted.

}  // namespace

namespace {

TEST(pg_advisory_inspection, pg_locks_gives_the_holding_and_the_waiting_sessions) {
  auto b = dlock::open(advisory_uri());
  auto other = dlock::open(advisory_uri());  // a pool of its own: another session waits
  const auto name = unique_name("inspect");
  EXPECT_FALSE(b->inspect(name).held);
  auto held = b->make_lock(name)->acquire();
  auto waiting_lock = other->make_lock(name);
  std::thread waiter([&] { (void)waiting_lock->try_acquire_for(10s); });
  dlock::lock_info info;
  ASSERT_TRUE(eventually([&] {
    info = b->inspect(name);
    return !info.waiters.empty();
  }));
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_TRUE(info.holders[0].owner.starts_with("pid ")) << info.holders[0].owner;
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::mutex);
  EXPECT_TRUE(info.waiters_known);
  EXPECT_NE(info.waiters[0].owner, info.holders[0].owner);
  held.release();
  waiter.join();
}

TEST(pg_advisory_inspection, force_release_terminates_the_holding_session) {
  auto b = dlock::open(advisory_uri());
  auto breaker = dlock::open(advisory_uri());
  const auto name = unique_name("break");
  auto held = b->make_lock(name)->acquire();
  const auto before = breaker->inspect(name);
  ASSERT_EQ(before.holders.size(), 1u);
  const auto removed = breaker->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, before.holders[0].owner);
  EXPECT_TRUE(eventually([&] { return !breaker->inspect(name).held; }));
  EXPECT_TRUE(fires_within(held.lost_token(), 15s)) << "the session monitor reports the lease lost";
}

// One lease's ttl running out must not end a session other leases hold locks on
// (shared_sessions.hpp): advisory locks are the session's, and the server would free them all.
TEST(pg_advisory_sessions, a_lapsed_lease_leaves_its_shared_session_to_the_others) {
  auto be = dlock::open(advisory_uri("max_connections=3"));  // max_dedicated 2: 1 shared
  dlock::sql::testing::expect_a_lapsed_lease_to_leave_its_session_to_the_others(
      *be, [](const std::string& name) -> std::optional<int> {
        for (const auto& row : probe::advisory_rows(advisory_uri(), name))
          if (row.granted) return row.pid;
        return std::nullopt;
      });
}

TEST(pg_advisory_sessions, leases_of_a_partitioned_shared_session_leave_it_without_waiting_on_the_link) {
  const char* host = std::getenv("DLOCK_POSTGRES_HOST");
  const char* port = std::getenv("DLOCK_POSTGRES_PORT");
  ASSERT_TRUE(host && port) << "DLOCK_POSTGRES_HOST/PORT are not set: start the servers with dlock-servers up postgres";
  dlock::testing::tcp_proxy proxy(host, static_cast<std::uint16_t>(std::stoi(port)));
  auto u = advisory_uri("ttl=3s&max_connections=3");
  const std::string server = std::string(host) + ":" + port;
  ASSERT_NE(u.find(server), std::string::npos);
  u.replace(u.find(server), server.size(), proxy.address());
  dlock::sql::testing::expect_partitioned_shared_leases_to_leave(u, proxy);
}

}  // namespace
