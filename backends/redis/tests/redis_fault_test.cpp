// Redis fault tests: the server is restarted, flushed or frozen (SIGSTOP) under the backend. They
// use the launcher (DLOCK_SERVERS, from compose/native/dlock-servers up redis) and run serially,
// since every other client of that server sees the fault too. They FAIL when a variable is unset.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/frozen_process.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

const std::vector<std::string> single_server_schemes{"redis", "redis+reentrant", "redis+fair"};

std::string redis_uri() { return dlock::testing::server_uri("DLOCK_REDIS_URI"); }
using dlock::testing::with_scheme;

std::shared_ptr<dlock::backend> open_uri(const std::string& text) { return dlock::default_registry().open(text); }

std::string unique(std::string_view what) { return dlock::testing::unique_name("dlock-fault:" + std::string(what)); }

using dlock::testing::frozen_process;

struct held_before {
  std::shared_ptr<dlock::backend> backend;
  std::string name;
  dlock::lease lease;
  std::uint64_t token = 0;
};

// Before the fix: after the restart the second client was granted at once, with token 1, while
// the old holder (token > 1) had not been told (its next renewal was up to ttl/3 away).
TEST(RedisFault, RestartWithoutPersistenceTellsTheHolderFirstAndTokensKeepIncreasing) {
  const auto uri = redis_uri();
  constexpr auto ttl = 3s;
  const std::string query = "?ttl=3s";
  std::vector<held_before> before;
  for (const auto& scheme : single_server_schemes) {
    held_before h{open_uri(with_scheme(uri, scheme) + query), unique("restart"), {}, 0};
    // The server may itself be younger than a ttl (another fault test): the grant waits for that.
    // Two grants, so the token before the restart is past the counter's first value.
    h.backend->make_lock(h.name)->try_acquire_for(3 * ttl).release();
    h.lease = h.backend->make_lock(h.name)->try_acquire_for(3 * ttl);
    ASSERT_TRUE(h.lease) << scheme;
    h.token = *h.lease.fencing_token();
    before.push_back(std::move(h));
  }
  {
    dlock::testing::stopped_server down("redis");
    ASSERT_TRUE(down.stopped());
    ASSERT_TRUE(down.start());
  }
  const auto started = clock_type::now();
  for (std::size_t i = 0; i < before.size(); ++i) {
    const auto& scheme = single_server_schemes[i];
    auto other = open_uri(with_scheme(uri, scheme) + query);  // another client, after the restart
    auto after = other->make_lock(before[i].name)->try_acquire_for(5 * ttl);
    const bool old_holder_told = before[i].lease.lost_token().stop_requested();
    ASSERT_TRUE(after) << scheme << ": not granted within 5 ttl of the restart";
    EXPECT_TRUE(old_holder_told) << scheme << ": a new holder was granted before the old one was told";
    EXPECT_GT(*after.fencing_token(), before[i].token) << scheme << ": the token went back after the restart";
    if (i == 0)
      std::printf("[ figure ] first grant %lld ms after the restart (ttl %lld ms); tokens %llu -> %llu\n",
                  static_cast<long long>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count()),
                  static_cast<long long>(std::chrono::milliseconds(ttl).count()),
                  static_cast<unsigned long long>(before[i].token),
                  static_cast<unsigned long long>(*after.fencing_token()));
  }
}

// Before the fix the holder learnt nothing until its next renewal; with the watchdog off, never.
// Now the backend watches the server and checks its leases as soon as the server is back.
TEST(RedisFault, HolderIsToldAsSoonAsTheRestartedServerAnswers) {
  const auto uri = redis_uri();
  for (const auto& scheme : single_server_schemes) {
    auto b = open_uri(with_scheme(uri, scheme) + "?ttl=20s&watchdog=false&wait_after_restart=false");
    auto l = b->make_lock(unique("told"))->try_acquire_for(5s);
    ASSERT_TRUE(l) << scheme;
    {
      dlock::testing::stopped_server down("redis");
      ASSERT_TRUE(down.stopped());
      ASSERT_TRUE(down.start());
    }
    const auto started = clock_type::now();
    // Bounded wait, far below the 20s validity after which the holder would stop on its own.
    for (int i = 0; i < 100 && !l.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(l.lost_token().stop_requested()) << scheme << ": the holder was not told within 5s of the restart";
    std::printf("[ figure ] %s: holder told %lld ms after the server was back\n", scheme.c_str(),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count()));
  }
}

// Before the fix: the counter restarted at 1 after FLUSHALL (here FLUSHDB of a database of its own).
TEST(RedisFault, FencingTokenSurvivesAFlush) {
  const auto uri = redis_uri();
  const auto u = dlock::uri::parse(uri);
  std::unique_ptr<redisContext, void (*)(redisContext*)> raw(
      redisConnect(u.hosts()[0].host.c_str(), u.hosts()[0].port_or(6379)), redisFree);
  ASSERT_TRUE(raw && !raw->err);
  freeReplyObject(redisCommand(raw.get(), "SELECT 9"));
  for (const auto& scheme : single_server_schemes) {
    auto b = open_uri(with_scheme(uri, scheme) + "/9?ttl=5s&wait_after_restart=false");
    const auto name = unique("flush");
    std::uint64_t first = 0;
    {
      auto l = b->make_lock(name)->try_acquire_for(5s);
      ASSERT_TRUE(l) << scheme;
      first = *l.fencing_token();
    }
    auto* r = static_cast<redisReply*>(redisCommand(raw.get(), "FLUSHDB"));
    ASSERT_NE(r, nullptr);
    freeReplyObject(r);
    auto l = b->make_lock(name)->try_acquire_for(5s);
    ASSERT_TRUE(l) << scheme;
    EXPECT_GT(*l.fencing_token(), first) << scheme << ": the token went back after FLUSHDB";
  }
}

// Before the fix: the acquire script whose reply was lost in the pause ran after SIGCONT and
// granted the lock to nobody, so the next client waited a whole ttl (20s here).
TEST(RedisFault, AnAcquireThatTimedOutInAPauseLeavesNoGrantBehind) {
  const auto uri = redis_uri();
  // wait_after_restart=false: the server may be young after the tests above; not this test's subject.
  const std::string query = "?ttl=20s&command_timeout=500ms&connect_timeout=500ms&wait_after_restart=false";
  for (const auto& scheme : single_server_schemes) {
    auto first = open_uri(with_scheme(uri, scheme) + query);
    const auto name = unique("paused");
    // Once before the pause, so the server has the script cached: the EVALSHA sent into the
    // pause then grants (instead of answering NOSCRIPT, which grants nothing).
    first->make_lock(name)->try_acquire_for(5s).release();
    {
      frozen_process pause("redis");
      ASSERT_TRUE(pause.frozen());
      std::error_code ec;
      auto l = first->make_lock(name)->try_acquire_for(200ms, ec);
      EXPECT_FALSE(l) << scheme << ": granted by a frozen server?";
      std::this_thread::sleep_for(500ms);  // the request waits in the server's socket
    }
    auto second = open_uri(with_scheme(uri, scheme) + query);
    const auto asked = clock_type::now();
    auto l = second->make_lock(name)->try_acquire_for(8s);  // well under the 20s ttl
    EXPECT_TRUE(l) << scheme << ": the lock stayed taken by a grant nobody holds";
    std::printf("[ figure ] %s: next client granted %lld ms after the pause ended\n", scheme.c_str(),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - asked).count()));
  }
}

// The same on Redlock: a SET NX sent into a pause of a majority of masters must not keep them
// locked by nobody. Before the fix the next client could not get a majority for a whole ttl.
TEST(RedlockFault, AnAcquireThatTimedOutInAPauseLeavesNoGrantBehind) {
  const auto v = dlock::testing::server_uri("DLOCK_REDLOCK_URI");
  // wait_after_restart=false: the masters may be young after the test above; not this test's subject.
  const std::string query = "?ttl=20s&command_timeout=500ms&connect_timeout=500ms&wait_after_restart=false";
  auto first = open_uri(v + query);
  const auto masters = dlock::uri::parse(v).hosts().size();
  const auto name = unique("paused");
  {
    std::vector<std::unique_ptr<frozen_process>> paused;
    for (std::size_t i = 1; i <= masters / 2 + 1; ++i) {
      paused.push_back(std::make_unique<frozen_process>("redlock." + std::to_string(i)));
      ASSERT_TRUE(paused.back()->frozen()) << "redlock." << i;
    }
    std::error_code ec;
    auto l = first->make_lock(name)->try_acquire(ec);
    EXPECT_FALSE(l) << "granted with a majority frozen?";
    std::this_thread::sleep_for(500ms);  // the SETs wait in the frozen masters' sockets
  }
  auto second = open_uri(v + query);
  auto l = second->make_lock(name)->try_acquire_for(8s);  // well under the 20s ttl
  EXPECT_TRUE(l) << "the frozen masters stayed locked by a grant nobody holds";
}

// A wait that spans a restart of the Redis server goes on (the core rides out the outage; the
// pool and the subscriber reconnect) and ends with the lock, after the old holder was
// told. Before: the wait was granted as soon as the server was back, the holder still untold.
TEST(RedisFault, AWaitGoesOnThroughARestartAndEndsAfterTheHolderWasTold) {
  const auto uri = redis_uri();
  const std::string query = "?ttl=2s";
  struct waiter {
    std::shared_ptr<dlock::backend> holder_backend, waiter_backend;
    dlock::lease held, got;
    std::error_code ec;
    bool holder_told_first = false;
    std::thread thread;
  };
  std::vector<waiter> waiters(single_server_schemes.size());
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    auto& w = waiters[i];
    const auto name = unique("wait-through");
    w.holder_backend = open_uri(with_scheme(uri, single_server_schemes[i]) + query);
    w.held = w.holder_backend->make_lock(name)->try_acquire_for(10s);
    ASSERT_TRUE(w.held) << single_server_schemes[i];
    w.waiter_backend = open_uri(with_scheme(uri, single_server_schemes[i]) + query);
    w.thread = std::thread([&w, name] {
      w.got = w.waiter_backend->make_lock(name)->try_acquire_for(30s, w.ec);
      w.holder_told_first = w.held.lost_token().stop_requested();
    });
  }
  std::this_thread::sleep_for(300ms);  // the waiters are subscribed and waiting
  {
    dlock::testing::stopped_server down("redis");
    if (down.stopped()) std::this_thread::sleep_for(500ms);  // an outage the waits must ride out
    EXPECT_TRUE(down.start());
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    auto& w = waiters[i];
    w.thread.join();
    EXPECT_FALSE(w.ec) << single_server_schemes[i] << ": " << w.ec.message();
    EXPECT_TRUE(w.got) << single_server_schemes[i] << ": the wait did not end with the lock";
    EXPECT_TRUE(w.holder_told_first) << single_server_schemes[i] << ": granted before the old holder was told";
  }
}

// antirez's delayed restart for Redlock: a majority of masters restarted without persistence must
// not grant the lock to a second client before the holder was told. Before: granted at once.
TEST(RedlockFault, RestartedMajorityGrantsNothingBeforeTheHolderWasTold) {
  const auto v = dlock::testing::server_uri("DLOCK_REDLOCK_URI");
  const std::string query = "?ttl=3s";
  const auto masters = dlock::uri::parse(v).hosts().size();
  std::string majority;
  for (std::size_t i = 1; i <= masters / 2 + 1; ++i) majority += " redlock." + std::to_string(i);
  auto holder_backend = open_uri(v + query);
  const auto name = unique("redlock-restart");
  auto held = holder_backend->make_lock(name)->try_acquire_for(10s);
  ASSERT_TRUE(held);
  {
    struct restart_at_exit {
      std::string names;
      ~restart_at_exit() { dlock::testing::run_launcher("start" + names); }
    } restart{majority};
    ASSERT_EQ(dlock::testing::run_launcher("stop" + majority), 0);
  }
  auto other = open_uri(v + query);
  auto after = other->make_lock(name)->try_acquire_for(15s);
  const bool holder_told = held.lost_token().stop_requested();
  ASSERT_TRUE(after) << "not granted within 5 ttl of the restart";
  EXPECT_TRUE(holder_told) << "a second holder was granted before the first was told";
}

// After a restart the pool's idle connections are dead; the first command must not fail on one.
TEST(RedisFault, FirstAcquireAfterARestartUsesAFreshConnection) {
  const auto uri = redis_uri();
  auto b = open_uri(uri + "?ttl=1s&pool_size=4");
  {
    // Fill the pool with idle connections.
    std::vector<dlock::lease> held;
    for (int i = 0; i < 4; ++i) {
      held.push_back(b->make_lock(unique("pool"))->try_acquire_for(3s));
      ASSERT_TRUE(held.back());
    }
  }
  {
    dlock::testing::stopped_server down("redis");
    ASSERT_TRUE(down.stopped());
    ASSERT_TRUE(down.start());
  }
  std::error_code ec;
  auto l = b->make_lock(unique("fresh"))->try_acquire_for(5s, ec);
  EXPECT_FALSE(ec) << dlock::last_error_message();
  EXPECT_TRUE(l);
}

}  // namespace

namespace {

// uptime_in_seconds of the server at `port`, by INFO server on a connection of its own; -1 if none.
long long uptime_in_seconds(const std::string& host, int port) {
  std::unique_ptr<redisContext, decltype(&redisFree)> c(redisConnect(host.c_str(), port), &redisFree);
  if (!c || c->err != 0) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c.get(), "INFO server"));
  if (r == nullptr) return -1;
  std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(r, &freeReplyObject);
  if (reply->type != REDIS_REPLY_STRING) return -1;
  const std::string_view info(reply->str, reply->len);
  const auto at = info.find("uptime_in_seconds:");
  return at == std::string_view::npos ? -1 : std::atoll(info.data() + at + 18);
}

// Sleeps until the wall clock's fraction of a second is `fraction` (Redis counts uptime in whole
// wall-clock seconds).
void sleep_until_wall_fraction(std::chrono::milliseconds fraction) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto into = std::chrono::duration_cast<std::chrono::milliseconds>(now) % 1000;
  std::this_thread::sleep_for(into <= fraction ? fraction - into : 1000ms - into + fraction);
}

}  // namespace

// Redis's uptime_in_seconds is the difference of two whole-second wall-clock readings (now and the
// start, both rounded down), so it says 1 as soon as the wall clock passes a second boundary: a
// few milliseconds after the start at worst, not one second. Before the fix the backend took it
// for a lower bound of the age and placed the server's start up to one second too early: with a
// ttl of 2s the first grant came ~1.4s after the restart (1s ttl in `dlock compare`: 0.11s).
// The grants are measured against the instant before the launcher started the server, which is
// before the server process's own start: a grant earlier than one ttl after it is a defect. It is
// observed when the client returns, after the grant, so the measure errs on the side of passing
// only by a round trip. Every scheme, a waiter queued before the restart (the fair lock's queue,
// woken by its channel or its PTTL) and a client that connected once the server said uptime 1.
TEST(RedisFault, NoGrantBeforeTheRestartedServerIsOneTtlOld) {
  const auto uri = redis_uri();
  const char* host = std::getenv("DLOCK_REDIS_HOST");
  const char* port = std::getenv("DLOCK_REDIS_PORT");
  ASSERT_TRUE(host && port)
      << "DLOCK_REDIS_HOST and DLOCK_REDIS_PORT must be set (compose/native/dlock-servers up redis)";
  constexpr auto ttl = 2s;
  const std::string query = "?ttl=2s";
  struct observed {
    std::string who;
    std::optional<clock_type::time_point> granted;
    std::string error;
  };
  std::mutex mutex;
  std::vector<observed> grants;
  auto acquire_and_note = [&](std::shared_ptr<dlock::backend> b, std::string name, std::string who) {
    std::error_code ec;
    auto l = b->make_lock(name)->try_acquire_for(6 * ttl, ec);
    const auto at = clock_type::now();
    std::lock_guard lock(mutex);
    grants.push_back({std::move(who), l ? std::optional(at) : std::nullopt, ec ? dlock::last_error_message() : ""});
  };

  std::vector<held_before> holders;
  std::vector<std::jthread> waiting;
  for (const auto& scheme : single_server_schemes) {
    held_before h{open_uri(with_scheme(uri, scheme) + query), unique("young"), {}, 0};
    h.lease = h.backend->make_lock(h.name)->try_acquire_for(3 * ttl);  // waits if the server is young
    ASSERT_TRUE(h.lease) << scheme;
    waiting.emplace_back(acquire_and_note, open_uri(with_scheme(uri, scheme) + query), h.name,
                         scheme + " waiter queued before the restart");
    holders.push_back(std::move(h));
  }
  std::this_thread::sleep_for(300ms);  // the waiters are subscribed and (fair) queued
  clock_type::time_point before_start;
  {
    dlock::testing::stopped_server down("redis");
    ASSERT_TRUE(down.stopped());
    // Start late in a wall-clock second, so that the next boundary, when uptime turns 1, comes
    // well before the server is one second old.
    sleep_until_wall_fraction(600ms);
    before_start = clock_type::now();
    ASSERT_TRUE(down.start());
  }
  const auto deadline = before_start + 3s;
  while (uptime_in_seconds(host, std::atoi(port)) < 1 && clock_type::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const auto said_one = clock_type::now();
  std::printf(
      "[ figure ] the restarted server said uptime_in_seconds 1 at %lld ms after its start began\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(said_one - before_start).count()));
  for (std::size_t i = 0; i < holders.size(); ++i)
    waiting.emplace_back(acquire_and_note, open_uri(with_scheme(uri, single_server_schemes[i]) + query),
                         holders[i].name, single_server_schemes[i] + " client connected after uptime 1");
  waiting.clear();  // joins

  ASSERT_EQ(grants.size(), 2 * single_server_schemes.size());
  for (const auto& g : grants) {
    if (!g.granted) {
      ADD_FAILURE() << g.who << ": not granted within " << 6 * ttl.count() << "s: " << g.error;
      continue;
    }
    const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(*g.granted - before_start);
    std::printf("[ figure ] %s: granted %lld ms after the restart began (ttl %lld ms)\n", g.who.c_str(),
                static_cast<long long>(after.count()), static_cast<long long>(std::chrono::milliseconds(ttl).count()));
    EXPECT_GE(after, ttl) << g.who << ": granted " << after.count()
                          << " ms after the server restarted without persistence, less than its ttl: a holder "
                             "from before the restart may still be working (wait_after_restart)";
  }
}

// Stops Redlock masters: here, run alone, so no other Redlock test meets a stopped master (under
// `ctest -j2` the conformance suite's redlock tests did).
namespace {

// The launcher's stop/start (compose/native/dlock-servers), found through DLOCK_SERVERS.
int servers(const std::string& verb, const std::string& names) {
  return dlock::testing::run_launcher(verb + " " + names);
}

std::size_t master_count(const std::string& uri) { return dlock::uri::parse(uri).hosts().size(); }

TEST(Redlock, OneMasterStoppedStillAcquiresMajorityStoppedRefusesClearly) {
  const auto uri = dlock::testing::server_uri("DLOCK_REDLOCK_URI");
  const auto n = master_count(uri);
  // Not about restarts: the masters an earlier test here restarted may still be younger than a ttl.
  auto b = open_uri(uri + "?ttl=5s&wait_after_restart=false");
  ASSERT_EQ(servers("stop", "redlock.1"), 0);
  {
    auto l = b->make_lock(unique("one-down"))->try_acquire();
    EXPECT_TRUE(l) << "a majority of " << n << " is still up";
  }
  std::string majority = "redlock.1";
  for (std::size_t i = 2; i <= n / 2 + 1; ++i) majority += " redlock." + std::to_string(i);
  ASSERT_EQ(servers("stop", majority), 0);
  std::error_code ec;
  auto refused = b->make_lock(unique("majority-down"))->try_acquire(ec);
  EXPECT_FALSE(refused);
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << "not contention: " << dlock::last_error_message();
  EXPECT_NE(dlock::last_error_message().find("majority"), std::string::npos) << dlock::last_error_message();
  ASSERT_EQ(servers("start", majority), 0);
}

}  // namespace
