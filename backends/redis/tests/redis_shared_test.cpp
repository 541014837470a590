// The reader-writer lock and the semaphore of the redis schemes against a real server
// (DLOCK_REDIS_URI): Redisson's layouts key by key, Redisson holders respected, the one-name rule
// beside the mutex, holders in other processes (this executable again, with --shared-holder SPEC),
// expiry of a killed holder, renewal, pub/sub wake-ups, writer preference, max_count and
// RSemaphore conflicts, and a paused and a stopped server.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/frozen_process.hpp"
#include "dlock_test/high_water.hpp"
#include "dlock_test/permit_census.hpp"
#include "dlock_test/support.hpp"
#include "raw_redis.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::testing::server_uri;
using dlock::testing::unique_name;
using dlock::testing::with_query;
using dlock::testing::with_scheme;

const std::string client_id = "6a1d5b2e-0c7f-4c4e-9d3e-2b7a9f0e1c55";

std::shared_ptr<dlock::backend> open_scheme(std::string_view scheme, std::string_view query) {
  auto uri = with_scheme(server_uri("DLOCK_REDIS_URI"), scheme);
  return dlock::default_registry().open(
      with_query(with_query(uri, "wait_after_restart=false&client_id=" + client_id), query));
}
std::shared_ptr<dlock::backend> open_redis(std::string_view query) { return open_scheme("redis", query); }

dlock::lock_options owned_by(std::string owner, std::chrono::milliseconds ttl = 5s) {
  dlock::lock_options o;
  o.owner = std::move(owner);
  o.ttl = ttl;
  return o;
}

// The Redisson owner field dlock writes for an owner: "<client id>:<63-bit hash of the owner>".
std::string field_of(const std::string& owner) {
  return client_id + ":" +
         std::to_string(static_cast<std::uint64_t>(dlock::spi::sha256_int64(owner)) & 0x7fffffffffffffffULL);
}

namespace raw_redis = dlock::testing::raw_redis;
using raw_redis::command;
using raw_redis::reply_ptr;

raw_redis::context_ptr raw() { return raw_redis::connect(server_uri("DLOCK_REDIS_URI")); }
std::string str(const reply_ptr& r) { return r && r->str ? std::string(r->str, r->len) : std::string(); }
long long num(const reply_ptr& r) { return r ? r->integer : -99; }

// The start of the tests on a read hold: a backend opened with `query`, a raw connection, a fresh
// name (`what` and a random suffix) and a read hold of it (try_acquire_read: the test asserts it).
struct fresh_read {
  std::shared_ptr<dlock::backend> b;
  raw_redis::context_ptr c;
  std::string name;
  dlock::lease reading;
};

fresh_read read_fresh_name(std::string_view query, const std::string& what) {
  fresh_read r;
  r.b = open_redis(query);
  r.c = raw();
  r.name = unique_name(what);
  r.reading = r.b->make_rw_lock(r.name)->try_acquire_read();
  return r;
}
// HGETALL as field -> value.
std::map<std::string, std::string> hgetall(redisContext* c, const std::string& key) {
  std::map<std::string, std::string> out;
  auto r = command(c, {"HGETALL", key});
  for (std::size_t i = 0; r && i + 1 < r->elements; i += 2)
    out[std::string(r->element[i]->str, r->element[i]->len)] =
        std::string(r->element[i + 1]->str, r->element[i + 1]->len);
  return out;
}

// A raw subscription to one channel.
struct raw_subscription : raw_redis::subscriber {
  explicit raw_subscription(const std::string& channel) : subscriber(raw(), {channel}) { EXPECT_TRUE(subscribed()); }
};

// ---- holders in another process ----------------------------------------------------------------
// The other process of these tests is this executable again, started with `--shared-holder SPEC`
// (main() below runs it instead of the tests), SPEC being "rw <read|write> <name> <ttl ms>" or
// "sem <name> <max> <permits> <ttl ms>". It takes the grant, prints "held", and holds until killed.
std::vector<std::string> holder_command(const std::string& spec) { return {"/proc/self/exe", "--shared-holder", spec}; }

std::unique_ptr<dlock::testing::child_process> spawn_holder(const std::string& spec) {
  auto child = std::make_unique<dlock::testing::child_process>(holder_command(spec));
  for (auto line = child->read_line(20s); line; line = child->read_line(20s))
    if (*line == "held") return child;
  ADD_FAILURE() << "the holder process never said it held: " << spec;
  return child;
}

// ---- the reader-writer lock --------------------------------------------------------------------

TEST(RedisShared, RwLayoutIsRedissonsKeyByKey) {
  auto b = open_redis("ttl=5s");
  auto c = raw();
  const auto name = unique_name("rw-layout");
  auto a = b->make_rw_lock(name, owned_by("reader-a"));
  auto a2 = b->make_rw_lock(name, owned_by("reader-b"));
  raw_subscription channel("redisson_rwlock:{" + name + "}");

  auto first = a->try_acquire_read();
  auto second = a2->try_acquire_read();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(str(command(c.get(), {"TYPE", name})), "hash");
  const auto fa = field_of("reader-a"), fb = field_of("reader-b");
  EXPECT_EQ(hgetall(c.get(), name), (std::map<std::string, std::string>{{"mode", "read"}, {fa, "1"}, {fb, "1"}}));
  for (const auto& f : {fa, fb}) {
    const auto timeout_key = "{" + name + "}:" + f + ":rwlock_timeout:1";
    EXPECT_EQ(str(command(c.get(), {"TYPE", timeout_key})), "string") << timeout_key;
    EXPECT_GT(num(command(c.get(), {"PTTL", timeout_key})), 0);
    EXPECT_LE(num(command(c.get(), {"PTTL", timeout_key})), 5000);
  }
  EXPECT_GT(num(command(c.get(), {"PTTL", name})), 0);
  EXPECT_LE(num(command(c.get(), {"PTTL", name})), 5000);
  ASSERT_TRUE(first.fencing_token() && second.fencing_token());
  EXPECT_LT(*first.fencing_token(), *second.fencing_token());
  // The name's one fencing counter: its mutex (and Redisson's RFencedLock) counts with it too.
  EXPECT_EQ(str(command(c.get(), {"TYPE", "redisson_lock_token:{" + name + "}"})), "string");

  // One reader leaves: its field and timeout key go, nothing is published (a reader still holds).
  first.release();
  EXPECT_EQ(hgetall(c.get(), name), (std::map<std::string, std::string>{{"mode", "read"}, {fb, "1"}}));
  EXPECT_EQ(num(command(c.get(), {"EXISTS", "{" + name + "}:" + fa + ":rwlock_timeout:1"})), 0);
  // The last reader leaves: the hash goes and '0' (Redisson's UNLOCK_MESSAGE) is published.
  second.release();
  EXPECT_EQ(num(command(c.get(), {"EXISTS", name})), 0);
  EXPECT_EQ(channel.next_payload(2s), "0");

  auto w = a->try_acquire_write();
  ASSERT_TRUE(w);
  EXPECT_EQ(hgetall(c.get(), name), (std::map<std::string, std::string>{{"mode", "write"}, {fa + ":write", "1"}}));
  EXPECT_GT(num(command(c.get(), {"PTTL", name})), 0);
  EXPECT_LE(num(command(c.get(), {"PTTL", name})), 5000);
  EXPECT_GT(*w.fencing_token(), *second.fencing_token());
  w.release();
  EXPECT_EQ(num(command(c.get(), {"EXISTS", name})), 0);
  EXPECT_EQ(channel.next_payload(2s), "1") << "a write unlock publishes Redisson's READ_UNLOCK_MESSAGE";
}

TEST(RedisShared, RwLayoutIsTheSameOnEveryScheme) {
  for (const auto* scheme : {"redis", "redis+reentrant", "redis+fair"}) {
    auto b = open_scheme(scheme, "ttl=5s");
    ASSERT_TRUE(b->caps().has(dlock::capability::read_write)) << scheme;
    ASSERT_TRUE(b->caps().has(dlock::capability::semaphore)) << scheme;
    EXPECT_TRUE(b->caps().has(dlock::capability::writer_preferred)) << scheme;
    auto c = raw();
    const auto name = unique_name("rw-scheme");
    auto r = b->make_rw_lock(name, owned_by("o"))->try_acquire_read();
    ASSERT_TRUE(r) << scheme;
    EXPECT_EQ(hgetall(c.get(), name), (std::map<std::string, std::string>{{"mode", "read"}, {field_of("o"), "1"}}))
        << scheme;
  }
}

TEST(RedisShared, RedisSchemesOfferBothAndRedlockNeither) {
  for (const auto& info : dlock::default_registry().list()) {
    // The Sentinel and Cluster schemes are the same backend on the master the sentinels name, or the
    // master of the name's slot.
    const bool safe_single = info.scheme == "redis" || info.scheme == "redis+reentrant" ||
                             info.scheme == "redis+fair" || info.scheme.ends_with("+sentinel") ||
                             info.scheme.ends_with("+cluster");
    if (info.scheme.rfind("redis", 0) != 0 && info.scheme != "redlock") continue;
    EXPECT_EQ(info.primitives.rw_lock.has_value(), safe_single) << info.scheme;
    EXPECT_EQ(info.primitives.semaphore.has_value(), safe_single) << info.scheme;
  }
}

// What Redisson's own scripts leave on the server, written by hand: dlock obeys it.
TEST(RedisShared, RedissonHoldersAreRespected) {
  auto b = open_redis("ttl=5s");
  auto c = raw();
  const auto name = unique_name("rw-redisson");
  auto rw = b->make_rw_lock(name);
  // A Redisson writer (RedissonWriteLock.tryLockInnerAsync on an empty hash).
  command(c.get(), {"HSET", name, "mode", "write", "java-uuid:1:write", "1"});
  command(c.get(), {"PEXPIRE", name, "5000"});
  EXPECT_FALSE(rw->try_acquire_read());
  EXPECT_FALSE(rw->try_acquire_write());
  // A Redisson reader instead (RedissonReadLock.tryLockInnerAsync on an empty hash).
  command(c.get(), {"DEL", name});
  command(c.get(), {"HSET", name, "mode", "read", "java-uuid:7", "1"});
  command(c.get(), {"SET", "{" + name + "}:java-uuid:7:rwlock_timeout:1", "1", "PX", "5000"});
  command(c.get(), {"PEXPIRE", name, "5000"});
  EXPECT_FALSE(rw->try_acquire_write());
  auto r = rw->try_acquire_read();
  ASSERT_TRUE(r) << "readers share with a Redisson reader";
  r.release();
  // The Java reader's hold is alive: the hash stays, kept until its timeout key's end.
  EXPECT_EQ(str(command(c.get(), {"HGET", name, "java-uuid:7"})), "1");
  EXPECT_GT(num(command(c.get(), {"PTTL", name})), 0);
  EXPECT_FALSE(rw->try_acquire_write());
}

// ---- one name, one lock ------------------------------------------------------------------------
// The mutex of a name, its reader-writer lock and its semaphore all live at the name's raw key.

// Redisson's RLock / RFairLock field and a reader's are both "<client id>:<owner id>": one owner
// (lock_options::owner) using both the mutex and the reader-writer lock of a name. The mutex's
// hash is no reader's, and a reader's hash no mutex's: they exclude each other, and neither is
// written into the other's hash.
TEST(RedisShared, OneOwnerIdOnTheMutexAndTheReaderWriterLockStillExcludes) {
  for (const auto* scheme : {"redis+reentrant", "redis+fair"}) {
    SCOPED_TRACE(scheme);
    auto b = open_scheme(scheme, "ttl=5s");
    auto c = raw();
    const auto name = unique_name("same-owner");
    auto mutex = b->make_lock(name, owned_by("same"));
    auto rw = b->make_rw_lock(name, owned_by("same"));
    {
      auto read = rw->try_acquire_read();
      ASSERT_TRUE(read);
      std::error_code ec;
      EXPECT_FALSE(mutex->try_acquire(ec)) << "the mutex re-entered a reader's hold of the same owner id";
      EXPECT_FALSE(ec) << dlock::last_error_message();
      EXPECT_EQ(hgetall(c.get(), name),
                (std::map<std::string, std::string>{{"mode", "read"}, {field_of("same"), "1"}}));
    }
    {
      auto held = mutex->try_acquire();
      ASSERT_TRUE(held);
      std::error_code ec;
      EXPECT_FALSE(rw->try_acquire_read(ec)) << "a read was granted into the mutex's hash";
      EXPECT_FALSE(ec) << dlock::last_error_message();
      EXPECT_FALSE(rw->try_acquire_write(ec)) << "a write was granted beside the mutex";
      EXPECT_FALSE(ec) << dlock::last_error_message();
      EXPECT_EQ(hgetall(c.get(), name), (std::map<std::string, std::string>{{field_of("same"), "1"}}))
          << "the mutex's hash was changed";
    }
  }
}

// The reader-writer lock is writer-preferred, and the mutex counts as a writer: a waiting mutex
// holds back new readers, is woken by the last reader's release, and its grant takes its entry out
// of the waiting set. ttl 90 s and poll 90 s: without a message the waiting mutex would try again
// only a third of its ttl (30 s) after its last try, so a grant within 15 s of the release is the
// message's.
TEST(RedisShared, AWaitingMutexHoldsBackNewReadersAndTheLastReaderWakesIt) {
  using clock = std::chrono::steady_clock;
  for (const auto* scheme : {"redis", "redis+reentrant", "redis+fair"}) {
    SCOPED_TRACE(scheme);
    auto b = open_scheme(scheme, "ttl=90s&poll=90s..90s");
    auto c = raw();
    const auto name = unique_name("mutex-waits");
    const auto waiting = "{" + name + "}:dlock_writers_waiting";
    auto first = b->make_rw_lock(name)->try_acquire_read();
    ASSERT_TRUE(first);
    dlock::lease got;
    clock::time_point granted_at{};
    std::thread mutex_waits([&] {
      got = b->make_lock(name)->try_acquire_for(60s);
      granted_at = clock::now();
    });
    for (int i = 0; i < 500 && num(command(c.get(), {"ZCARD", waiting})) == 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(num(command(c.get(), {"ZCARD", waiting})), 1)
        << "the waiting mutex has no entry among the waiting writers";
    EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_read()) << "a new reader got in while a mutex waited";
    const auto released_at = clock::now();
    first.release();
    mutex_waits.join();
    ASSERT_TRUE(got) << "the waiting mutex was never granted";
    EXPECT_LT(granted_at - released_at, 15s) << "the waiting mutex was not woken by the last reader's release";
    EXPECT_EQ(num(command(c.get(), {"ZCARD", waiting})), 0) << "the mutex's grant left its entry";
    EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_read()) << "a reader got in beside the mutex";
    got.release();
    EXPECT_TRUE(b->make_rw_lock(name)->try_acquire_read_for(5s)) << "no read after the mutex's release";
  }
}

// A waiting mutex that gives up takes its entry out, and the reader it held back gets in.
TEST(RedisShared, AMutexThatGivesUpLetsTheReadersItHeldBackIn) {
  auto [b, c, name, first] = read_fresh_name("ttl=60s&poll=60s..60s", "mutex-gives-up");
  ASSERT_TRUE(first);
  EXPECT_FALSE(b->make_lock(name)->try_acquire_for(500ms));
  EXPECT_EQ(num(command(c.get(), {"ZCARD", "{" + name + "}:dlock_writers_waiting"})), 0);
  EXPECT_TRUE(b->make_rw_lock(name)->try_acquire_read()) << "a reader is still held back by a mutex that gave up";
}

// A semaphore's count key stays after its last permit is returned (Redisson's layout: a Redisson
// client may rely on it), so the name stays a semaphore's: a mutex or a reader-writer lock of it
// is refused at once, the waiting forms too, without touching the count, until the key is deleted.
TEST(RedisShared, ASemaphoresCountKeyKeepsItsNameFromLocksUntilDeleted) {
  for (const auto* scheme : {"redis", "redis+reentrant", "redis+fair"}) {
    SCOPED_TRACE(scheme);
    auto b = open_scheme(scheme, "ttl=5s");
    auto c = raw();
    const auto name = unique_name("sem-kept");
    b->make_semaphore(name, 2)->try_acquire(2).release();
    ASSERT_EQ(str(command(c.get(), {"GET", name})), "2");
    const auto expect_refused = [&](const std::error_code& ec, const dlock::lease& l,
                                    std::chrono::steady_clock::time_point start) {
      EXPECT_FALSE(l);
      EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
      const auto message = dlock::last_error_message();
      EXPECT_NE(message.find("in use as a semaphore"), std::string::npos) << message;
      EXPECT_NE(message.find("count key '" + name + "'"), std::string::npos) << message;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 3s) << "the waiting form waited instead of being refused";
    };
    std::error_code ec;
    auto start = std::chrono::steady_clock::now();
    auto l = b->make_lock(name)->try_acquire_for(5s, ec);
    expect_refused(ec, l, start);
    start = std::chrono::steady_clock::now();
    l = b->make_rw_lock(name)->try_acquire_write_for(5s, ec);
    expect_refused(ec, l, start);
    start = std::chrono::steady_clock::now();
    l = b->make_rw_lock(name)->try_acquire_read_for(5s, ec);
    expect_refused(ec, l, start);
    EXPECT_EQ(str(command(c.get(), {"GET", name})), "2") << "a refused lock touched the semaphore's count";
    // Deleted, as Redisson's delete() does, the name is free for a lock.
    command(c.get(), {"DEL", name, "{" + name + "}:timeout"});
    EXPECT_TRUE(b->make_lock(name)->try_acquire());
  }
}

TEST(RedisShared, ReadersTogetherAcrossProcessesWriterExcluded) {
  auto b = open_redis("ttl=5s");
  const auto name = unique_name("rw-procs");
  auto other = spawn_holder("rw read " + name + " 5000");
  auto rw = b->make_rw_lock(name);
  auto r = rw->try_acquire_read();
  EXPECT_TRUE(r) << "a reader of another process does not keep this reader out";
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_write()) << "nor lets a writer in";
  r.release();
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_write()) << "the other process still reads";

  const auto wname = unique_name("rw-procs-w");
  auto writer = spawn_holder("rw write " + wname + " 5000");
  auto rw2 = b->make_rw_lock(wname);
  EXPECT_FALSE(rw2->try_acquire_read());
  EXPECT_FALSE(rw2->try_acquire_write());
}

TEST(RedisShared, KilledReadersHoldExpiresAndAWriterGetsIn) {
  auto b = open_redis("ttl=1s");
  const auto name = unique_name("rw-killed");
  auto reader = spawn_holder("rw read " + name + " 1000");
  auto rw = b->make_rw_lock(name);
  // Held past several ttls: the holder's watchdog renews its hold.
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(rw->try_acquire_write());
  reader->kill_hard();
  (void)reader->wait(5s);
  // Bound: a hang guard well above the ttl; the hold itself expires at most a ttl after its last renewal.
  auto w = rw->try_acquire_write_for(10s);
  EXPECT_TRUE(w) << "the killed reader's hold never expired";
}

TEST(RedisShared, ReleaseAfterLossIsNotOwnerAndLostFires) {
  auto [b, c, name, r] = read_fresh_name("ttl=1s", "rw-lost");
  ASSERT_TRUE(r);
  command(c.get(), {"DEL", name});
  EXPECT_TRUE(dlock::testing::fires_within(r.lost_token(), 5s));
  std::error_code ec;
  r.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);

  auto s = b->make_semaphore(unique_name("sem-lost"), 2);
  auto p = s->try_acquire();
  ASSERT_TRUE(p);
  command(c.get(), {"DEL", "{" + std::string(s->name()) + "}:timeout"});
  EXPECT_TRUE(dlock::testing::fires_within(p.lost_token(), 5s));
  p.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(RedisShared, RenewalKeepsOnlyOurOwnReadHolds) {
  auto b = open_redis("ttl=1s");
  auto c = raw();
  const auto name = unique_name("rw-renew");
  auto r = b->make_rw_lock(name, owned_by("live", 1s))->try_acquire_read();
  ASSERT_TRUE(r);
  // A dead reader beside us (a hold that nobody renews).
  command(c.get(), {"HSET", name, "dead:1", "1"});
  command(c.get(), {"SET", "{" + name + "}:dead:1:rwlock_timeout:1", "1", "PX", "1000"});
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(r.held());
  EXPECT_EQ(num(command(c.get(), {"EXISTS", "{" + name + "}:dead:1:rwlock_timeout:1"})), 0);
  EXPECT_EQ(num(command(c.get(), {"EXISTS", "{" + name + "}:" + field_of("live") + ":rwlock_timeout:1"})), 1);
  r.release();
  EXPECT_EQ(num(command(c.get(), {"EXISTS", name})), 0) << "the last live reader's release drops the dead one's field";
}

// The watchdog renews many leases of both primitives together (one pipeline per round): all still
// held, on the server too, after several ttls.
TEST(RedisShared, ManyLeasesStayHeldByTheirRenewals) {
  auto b = open_redis("ttl=1s");
  auto c = raw();
  const auto name = unique_name("many");
  std::vector<std::unique_ptr<dlock::rw_lock>> locks;
  std::vector<dlock::lease> held;
  for (int i = 0; i < 100; ++i) {
    locks.push_back(b->make_rw_lock(name + "-" + std::to_string(i % 10)));
    held.push_back(locks.back()->try_acquire_read());
    ASSERT_TRUE(held.back());
  }
  auto sem = b->make_semaphore(name + "-sem", 100);
  for (int i = 0; i < 100; ++i) {
    held.push_back(sem->try_acquire());
    ASSERT_TRUE(held.back());
  }
  std::this_thread::sleep_for(3500ms);
  for (const auto& l : held) EXPECT_TRUE(l.held());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(hgetall(c.get(), name + "-" + std::to_string(i)).size(), 11u);
  EXPECT_EQ(num(command(c.get(), {"ZCARD", "{" + name + "-sem}:timeout"})), 100);
  for (auto& l : held) {
    std::error_code ec;
    l.release(ec);
    EXPECT_FALSE(ec) << ec.message();
  }
  EXPECT_EQ(str(command(c.get(), {"GET", name + "-sem"})), "100");
}

TEST(RedisShared, ReleaseWakesWaitersWithoutPolling) {
  // poll=1h and a holder ttl of 60s: only the release's message can end these waits in time.
  auto b = open_redis("ttl=60s&poll=1h");
  const auto name = unique_name("rw-wake");
  auto holder = b->make_rw_lock(name);
  auto w = holder->try_acquire_write();
  ASSERT_TRUE(w);
  std::vector<std::thread> readers;
  std::atomic<int> got{0};
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      auto r = b->make_rw_lock(name)->try_acquire_read_for(30s);
      if (r) ++got;
      std::this_thread::sleep_for(300ms);  // hold together
    });
  std::this_thread::sleep_for(500ms);
  w.release();
  for (auto& t : readers) t.join();
  EXPECT_EQ(got.load(), 3) << "a write release wakes every waiting reader";

  auto r = holder->try_acquire_read();
  ASSERT_TRUE(r);
  std::thread writer([&] { EXPECT_TRUE(b->make_rw_lock(name)->try_acquire_write_for(30s)); });
  std::this_thread::sleep_for(500ms);
  r.release();
  writer.join();

  auto s1 = b->make_semaphore(unique_name("sem-wake"), 1);
  auto p = s1->try_acquire();
  ASSERT_TRUE(p);
  std::thread waiter([&] { EXPECT_TRUE(b->make_semaphore(s1->name(), 1)->try_acquire_for(30s)); });
  std::this_thread::sleep_for(500ms);
  p.release();
  waiter.join();
}

TEST(RedisShared, WaitingWriterHoldsBackNewReaders) {
  auto b = open_redis("ttl=2s&poll=1h");
  auto c = raw();
  const auto name = unique_name("rw-pref");
  auto first = b->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(first);
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    auto w = b->make_rw_lock(name)->try_acquire_write_for(30s);
    EXPECT_TRUE(w);
    writer_in = true;
    std::this_thread::sleep_for(300ms);
    w.release();
  });
  const auto waiting = "{" + name + "}:dlock_writers_waiting";
  while (num(command(c.get(), {"ZCARD", waiting})) == 0) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(str(command(c.get(), {"TYPE", waiting})), "zset");
  auto late_reader = b->make_rw_lock(name);
  EXPECT_FALSE(late_reader->try_acquire_read()) << "a reader arriving while a writer waits got in first";
  std::thread reader([&] {
    auto r = late_reader->try_acquire_read_for(30s);
    EXPECT_TRUE(r);
    // The writer marks itself in at its grant and holds 300 ms more: a reader granted first would
    // find it unmarked. (Whether it is done cannot tell: its release may wake us before it says so.)
    EXPECT_TRUE(writer_in.load()) << "the waiting reader got in before the waiting writer";
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(writer_in.load());
  first.release();
  writer.join();
  reader.join();
  EXPECT_EQ(num(command(c.get(), {"EXISTS", waiting})), 0) << "the writer's grant took its entry out";

  // A writer that gives up takes its entry out at once, and readers go on.
  auto again = b->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(again);
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_write_for(300ms));
  EXPECT_EQ(num(command(c.get(), {"ZCARD", waiting})), 0);
  EXPECT_TRUE(b->make_rw_lock(name)->try_acquire_read());
}

TEST(RedisShared, KilledWaitingWritersEntryExpires) {
  auto [b, c, name, r] = read_fresh_name("ttl=1s", "rw-pref-killed");
  ASSERT_TRUE(r);
  dlock::testing::child_process writer(holder_command("rw write " + name + " 1000"));
  const auto waiting = "{" + name + "}:dlock_writers_waiting";
  for (int i = 0; i < 2000 && num(command(c.get(), {"ZCARD", waiting})) == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(num(command(c.get(), {"ZCARD", waiting})), 1);
  EXPECT_FALSE(b->make_rw_lock(name)->try_acquire_read());
  writer.kill_hard();
  (void)writer.wait(5s);
  // Bound: a hang guard; the entry expires a ttl after the writer's last try.
  EXPECT_TRUE(b->make_rw_lock(name)->try_acquire_read_for(10s)) << "a killed writer's entry held readers back for good";
}

TEST(RedisShared, ReadersOverlapWritersAloneUnderContention) {
  auto b = open_redis("ttl=5s&poll=1h");
  const auto name = unique_name("rw-stress");
  auto shared_object = b->make_rw_lock(name);  // one owner used by several threads, as well as objects of their own
  std::atomic<int> readers{0}, writers{0}, most_readers{0}, violations{0}, writes{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&, t] {
      auto own = b->make_rw_lock(name);
      auto& rw = t % 2 == 0 ? *shared_object : *own;
      for (int k = 0; k < 25; ++k) {
        const bool write = (k + t) % 5 == 0;
        auto l = write ? rw.try_acquire_write_for(30s) : rw.try_acquire_read_for(30s);
        ASSERT_TRUE(l);
        if (write) {
          if (++writers != 1 || readers.load() != 0) ++violations;
          ++writes;
          std::this_thread::sleep_for(1ms);
          --writers;
        } else {
          dlock::testing::raise_to(most_readers, ++readers);
          if (writers.load() != 0) ++violations;
          std::this_thread::sleep_for(2ms);
          --readers;
        }
        l.release();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(most_readers.load(), 1) << "readers never held together";
  EXPECT_EQ(writes.load(), 30);
}

// ---- the semaphore -----------------------------------------------------------------------------

TEST(RedisShared, SemaphoreLayoutIsRedissonsKeyByKey) {
  auto b = open_redis("ttl=5s");
  auto c = raw();
  const auto name = unique_name("sem-layout");
  auto s = b->make_semaphore(name, 3);
  raw_subscription channel("redisson_sc:{" + name + "}");
  auto before = command(c.get(), {"TIME"});
  const auto now_ms = std::stoll(before->element[0]->str) * 1000;
  auto two = s->try_acquire(2);
  ASSERT_TRUE(two);
  EXPECT_EQ(str(command(c.get(), {"TYPE", name})), "string");
  EXPECT_EQ(str(command(c.get(), {"GET", name})), "1") << "available permits";
  const auto timeouts = "{" + name + "}:timeout";
  EXPECT_EQ(str(command(c.get(), {"TYPE", timeouts})), "zset");
  auto members = command(c.get(), {"ZRANGE", timeouts, "0", "-1", "WITHSCORES"});
  ASSERT_EQ(members->elements, 4u);
  for (std::size_t i = 0; i < 4; i += 2) {
    EXPECT_EQ(members->element[i]->len, 16u) << "a 16-byte permit id, as Redisson's";
    const auto expiry = std::stoll(std::string(members->element[i + 1]->str, members->element[i + 1]->len));
    EXPECT_GE(expiry, now_ms + 5000 - 1000);
    EXPECT_LE(expiry, now_ms + 5000 + 2000) << "expiry = server time + ttl, in ms";
  }
  EXPECT_EQ(str(command(c.get(), {"TYPE", "dlock_semaphore_token:{" + name + "}"})), "string");
  auto one = b->make_semaphore(name, 3)->try_acquire();
  ASSERT_TRUE(one);
  EXPECT_GT(*one.fencing_token(), *two.fencing_token());
  EXPECT_FALSE(s->try_acquire()) << "3 of 3 held";
  two.release();
  EXPECT_EQ(str(command(c.get(), {"GET", name})), "2");
  EXPECT_EQ(num(command(c.get(), {"ZCARD", timeouts})), 1);
  EXPECT_EQ(channel.next_payload(2s), "2") << "a release publishes the permits now available";
}

TEST(RedisShared, SemaphoreTakesRedissonsTrySetPermitsAndRefusesAnotherMaxCount) {
  auto b = open_redis("ttl=5s");
  auto c = raw();
  const auto name = unique_name("sem-max");
  command(c.get(), {"SET", name, "5"});  // RPermitExpirableSemaphore.trySetPermits(5)
  auto ok = b->make_semaphore(name, 5)->try_acquire(5);
  EXPECT_TRUE(ok);
  std::error_code ec;
  auto wrong = b->make_semaphore(name, 4)->try_acquire(1, ec);
  EXPECT_FALSE(wrong);
  EXPECT_EQ(ec, dlock::errc::name_conflict);
  EXPECT_NE(dlock::last_error_message().find("5 permits"), std::string::npos) << dlock::last_error_message();
  EXPECT_THROW((void)b->make_semaphore(name, 6)->try_acquire_for(1s), dlock::error);
}

// Redisson's plain RSemaphore keeps its permits in the count alone: a holder's permit is a DECR
// with no record of who holds it. The total then looks short of max_count; dlock cannot tell that
// from another max_count, so it refuses as a conflict naming both causes and the key, and leaves
// the count alone.
TEST(RedisShared, ARedissonRSemaphoreHoldingPermitsIsAConflictNamingBothCauses) {
  auto b = open_redis("ttl=5s");
  auto c = raw();
  const auto name = unique_name("sem-rsemaphore");
  command(c.get(), {"SET", name, "2"});     // RSemaphore.trySetPermits(2)
  command(c.get(), {"DECRBY", name, "1"});  // RSemaphore.acquire(): one permit held, recorded nowhere
  std::error_code ec;
  auto permit = b->make_semaphore(name, 2)->try_acquire(1, ec);
  EXPECT_FALSE(permit);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
  const auto message = dlock::last_error_message();
  EXPECT_NE(message.find("another max_count"), std::string::npos) << message;
  EXPECT_NE(message.find("Redisson's plain RSemaphore"), std::string::npos) << message;
  EXPECT_NE(message.find("'" + name + "'"), std::string::npos) << message;
  permit = b->make_semaphore(name, 2)->try_acquire_for(1s, 1, ec);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << "the waiting form: " << dlock::last_error_message();
  EXPECT_EQ(str(command(c.get(), {"GET", name})), "1") << "the count was touched";
}

TEST(RedisShared, DeadSemaphoreHoldersPermitsExpire) {
  auto b = open_redis("ttl=1s");
  const auto name = unique_name("sem-dead");
  auto holder = spawn_holder("sem " + name + " 2 2 1000");
  auto s = b->make_semaphore(name, 2);
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(s->try_acquire()) << "the holder's watchdog keeps its permits";
  holder->kill_hard();
  (void)holder->wait(5s);
  // Bound: a hang guard; the permits expire at most a ttl after their last renewal, and the
  // waiter wakes at the expiry the server told it about.
  auto both = b->make_semaphore(name, 2, owned_by("w", 5s))->try_acquire_for(10s, 2);
  EXPECT_TRUE(both) << "the killed holder's permits never came back";
}

TEST(RedisShared, SemaphoreNeverOverAdmits) {
  auto b = open_redis("ttl=5s");
  const auto name = unique_name("sem-n");
  dlock::testing::permit_census census(3);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&] {
      auto s = b->make_semaphore(name, 3);
      for (int k = 0; k < 20; ++k) {
        auto p = s->try_acquire_for(20s);
        ASSERT_TRUE(p);
        census.hold(1ms);
        p.release();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(census.over(), 0) << "grants that found more than 3 permits held";
  EXPECT_EQ(census.most(), 3) << "the semaphore does reach its count";
}

// ---- outages (stops and freezes the server: this executable runs alone) ------------------------

// An acquire whose reply is lost to command_timeout may still be run by the server: the late
// grant is read and released on the same connection, instead of holding the name for a ttl.
TEST(RedisShared, AnAcquireThatTimedOutInAPauseLeavesNoGrantBehind) {
  auto b = open_redis("ttl=20s&command_timeout=300ms&connect_timeout=300ms");
  auto c = raw();
  const auto rw_name = unique_name("rw-paused"), sem_name = unique_name("sem-paused");
  auto rw = b->make_rw_lock(rw_name);
  auto sem = b->make_semaphore(sem_name, 2);
  // Once before, so the scripts are cached: the EVALSHAs sent into the pause then grant.
  rw->try_acquire_write().release();
  sem->try_acquire(2).release();
  {
    dlock::testing::frozen_process pause("redis");
    ASSERT_TRUE(pause.frozen());
    std::error_code ec;
    EXPECT_FALSE(rw->try_acquire_write(ec));
    EXPECT_EQ(ec, dlock::errc::backend_unavailable);
    EXPECT_FALSE(sem->try_acquire(2, ec));
    EXPECT_EQ(ec, dlock::errc::backend_unavailable);
    std::this_thread::sleep_for(300ms);  // the requests wait in the server's socket
  }
  auto other = open_redis("ttl=20s");
  EXPECT_TRUE(other->make_rw_lock(rw_name)->try_acquire_write_for(8s)) << "held by a grant nobody received";
  EXPECT_TRUE(other->make_semaphore(sem_name, 2)->try_acquire_for(8s, 2)) << "permits taken by nobody";
}

TEST(RedisShared, ServerDownIsBackendUnavailable) {
  auto b = open_redis("ttl=2s&connect_timeout=300ms&command_timeout=300ms");
  auto rw = b->make_rw_lock(unique_name("rw-down"));
  auto s = b->make_semaphore(unique_name("sem-down"), 2);
  dlock::testing::stopped_server down("redis");
  ASSERT_TRUE(down.stopped());
  std::error_code ec;
  EXPECT_FALSE(rw->try_acquire_read(ec));
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << dlock::last_error_message();
  EXPECT_NE(dlock::last_error_message().find("redis"), std::string::npos) << dlock::last_error_message();
  EXPECT_FALSE(s->try_acquire(1, ec));
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << dlock::last_error_message();
  EXPECT_FALSE(rw->try_acquire_write_for(500ms, ec)) << "a wait waits the outage out until its deadline";
}

// The holder process (see holder_command): takes the grant SPEC names, says "held", holds until killed.
int hold(const std::string& spec) {
  std::istringstream in(spec);
  std::string kind, name;
  in >> kind;
  dlock::lease held;
  if (kind == "rw") {
    std::string side;
    long ttl = 0;
    in >> side >> name >> ttl;
    auto b = open_redis("ttl=" + std::to_string(ttl) + "ms");
    auto rw = b->make_rw_lock(name);
    held = side == "read" ? rw->acquire_read() : rw->acquire_write();
  } else {
    std::uint32_t max = 0, permits = 0;
    long ttl = 0;
    in >> name >> max >> permits >> ttl;
    auto b = open_redis("ttl=" + std::to_string(ttl) + "ms");
    held = b->make_semaphore(name, max)->acquire(permits);
  }
  std::printf("held\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(1h);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "--shared-holder") return hold(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
