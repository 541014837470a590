// Redis-specific tests against a real server: DLOCK_REDIS_URI (redis://host:port, from
// compose/native/dlock-servers) and DLOCK_REDLOCK_URI. They FAIL when a variable is unset.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <atomic>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/batch_renewal.hpp"
#include "dlock_test/support.hpp"
#include "raw_redis.hpp"

namespace {

using namespace std::chrono_literals;

using dlock::testing::server_uri;
using dlock::testing::unique_name;
using dlock::testing::with_scheme;

// wait_after_restart=false: redis_fault_test and the Redlock stop/start test restart servers, and
// these tests, about other things, must not meet a server younger than their ttl (that rule is
// redis_fault_test's subject).
std::shared_ptr<dlock::backend> open_uri(const std::string& text) {
  return dlock::default_registry().open(dlock::testing::with_query(text, "wait_after_restart=false"));
}

namespace raw_redis = dlock::testing::raw_redis;
using raw_redis::context_ptr;
using raw_redis::reply_ptr;

reply_ptr cmd(redisContext* c, const char* fmt, std::string_view a) {
  return reply_ptr(static_cast<redisReply*>(redisCommand(c, fmt, a.data(), a.size())));
}

// What most tests start from: DLOCK_REDIS_URI, a backend opened on it with `query`, a fresh name
// (`what` and a random suffix), and a lease of that name (try_acquire: the test asserts it).
struct fresh_hold {
  std::string uri;
  std::shared_ptr<dlock::backend> b;
  std::string name;
  dlock::lease lease;
};

fresh_hold hold_fresh_name(const std::string& query, const std::string& what) {
  fresh_hold h;
  h.uri = server_uri("DLOCK_REDIS_URI");
  h.b = open_uri(h.uri + query);
  h.name = unique_name(what);
  h.lease = h.b->make_lock(h.name)->try_acquire();
  return h;
}

TEST(Redis, SimpleLayoutIsRedisPys) {
  auto [uri, b, name, l] = hold_fresh_name("?ttl=5s", "layout");
  ASSERT_TRUE(l);
  auto c = raw_redis::connect(uri);
  auto type = cmd(c.get(), "TYPE %b", name);
  EXPECT_EQ(std::string(type->str), "string");
  auto value = cmd(c.get(), "GET %b", name);
  const std::string token(value->str, value->len);
  EXPECT_EQ(token.size(), 38u) << "'dlock:' and a 128-bit hex token: " << token;
  EXPECT_EQ(token.rfind("dlock:", 0), 0u) << "dlock's mark (its holders publish their release): " << token;
  auto pttl = cmd(c.get(), "PTTL %b", name);
  EXPECT_GT(pttl->integer, 0);
  EXPECT_LE(pttl->integer, 5000);
  ASSERT_TRUE(l.fencing_token());
  // The name's one fencing counter (Redisson's RFencedLock key), which its reader-writer lock
  // counts with too.
  EXPECT_EQ(cmd(c.get(), "TYPE redisson_lock_token:{%b}", name)->str, std::string("string"));
  // The release is published to the mutex's waiters and to the name's reader-writer lock waiters.
  const auto mutex_channel = "redisson_lock__channel:{" + name + "}", rw_channel = "redisson_rwlock:{" + name + "}";
  raw_redis::subscriber sub(raw_redis::connect(uri), {mutex_channel, rw_channel});
  l.release();
  EXPECT_EQ(cmd(c.get(), "EXISTS %b", name)->integer, 0);
  EXPECT_EQ(sub.next_channel_and_payload(2s), mutex_channel + " 0");
  EXPECT_EQ(sub.next_channel_and_payload(2s), rw_channel + " 1");
}

TEST(Redis, FencingTokenGrowsAcrossExpiryAndLostFires) {
  auto [uri, b, name, first] = hold_fresh_name("?ttl=600ms&watchdog=false", "expiry");
  ASSERT_TRUE(first);
  const auto t1 = *first.fencing_token();
  std::this_thread::sleep_for(900ms);  // expires on the server while the holder "still works"
  EXPECT_TRUE(first.lost_token().stop_requested()) << "validity ran out: lost must have fired";
  auto second = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(second);
  EXPECT_GT(*second.fencing_token(), t1);
  std::error_code ec;
  first.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(Redis, DeletedOutOfBandIsReportedLostByRenewal) {
  auto [uri, b, name, l] = hold_fresh_name("?ttl=900ms", "deleted");
  ASSERT_TRUE(l);
  auto c = raw_redis::connect(uri);
  cmd(c.get(), "DEL %b", name);  // what a restart without persistence leaves behind
  for (int i = 0; i < 40 && !l.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(l.lost_token().stop_requested());
}

// Leases taken about together are renewed together: one pipeline for many, not a round trip each
// (10,000 leases renewed one by one cost a third of a core).
TEST(Redis, WatchdogRenewsLeasesDueTogetherInOneBatch) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  for (const auto scheme : {"redis", "redis+reentrant"}) {
    SCOPED_TRACE(scheme);
    auto b = open_uri(with_scheme(uri, scheme) + "?ttl=1500ms");
    auto c = raw_redis::connect(uri);
    ASSERT_NO_FATAL_FAILURE(dlock::testing::expect_batched_renewal(
        *b, {.remove = [&](const std::string& name) { cmd(c.get(), "DEL %b", name); }}));
  }
}

TEST(Redis, ClientKillOfEveryConnectionKeepsTheLeaseAndReconnects) {
  auto [uri, b, name, l] = hold_fresh_name("?ttl=3s", "killed");
  ASSERT_TRUE(l);
  auto c = raw_redis::connect(uri);
  // Kill this process's dlock connections (named dlock-<pid>), and only those: the server may be
  // shared with other tests. The pooled connection of the holder goes away.
  int killed = 0;
  for (const auto& line : raw_redis::this_process_clients(c.get())) {
    const auto id = line.substr(3, line.find(' ') - 3);  // "id=<n> ..."
    auto r = reply_ptr(static_cast<redisReply*>(redisCommand(c.get(), "CLIENT KILL ID %s", id.c_str())));
    killed += r && r->type == REDIS_REPLY_INTEGER ? static_cast<int>(r->integer) : 0;
  }
  EXPECT_GE(killed, 1) << "the holder's pooled connection was not found by name";
  // By design the lease is not tied to a connection: it survives, and the next command reconnects.
  std::error_code ec;
  l.renew(3s, ec);
  if (ec) l.renew(3s, ec);  // the first command may meet the dead socket; the pool then reconnects
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(l.lost_token().stop_requested());
  l.release();
}

TEST(Redis, WaiterIsWokenByReleaseMessage) {
  // A 60s ttl and poll=59s..60s: only the release message can wake the waiter before the deadline.
  auto fresh = hold_fresh_name("?ttl=60s&poll=59s..60s", "wake");
  ASSERT_TRUE(fresh.lease);
  std::thread releaser([&] {
    std::this_thread::sleep_for(200ms);
    fresh.lease.release();
  });
  auto waiter = fresh.b->make_lock(fresh.name)->try_acquire_for(20s);
  releaser.join();
  EXPECT_TRUE(waiter);
}

TEST(Redis, InteropWithRedisPyLock) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  const auto u = dlock::uri::parse(uri);
  auto b = open_uri(uri + "?ttl=10s");
  const auto name = unique_name("py");
  const auto py = [&](const std::string& body) {
    // Debian's interpreter, where python3-redis lives (a pyenv shim may come first on PATH).
    const std::string cmdline = "/usr/bin/python3 -c \"import redis,sys; r=redis.Redis(host='" + u.hosts()[0].host +
                                "', port=" + std::to_string(u.hosts()[0].port_or(6379)) + "); l=r.lock('" + name +
                                "', timeout=10); " + body + "\"";
    return std::system(cmdline.c_str());
  };
  {
    auto l = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(l);
    EXPECT_EQ(py("sys.exit(0 if not l.acquire(blocking=False) else 1)"), 0) << "redis-py took a lock dlock holds";
  }
  // redis-py holds it (and exits without releasing: the key lives for its 10s timeout).
  ASSERT_EQ(py("sys.exit(0 if l.acquire(blocking=False) else 1)"), 0);
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "dlock took a lock redis-py holds";
  auto c = raw_redis::connect(uri);
  cmd(c.get(), "DEL %b", name);
}

// A redis-py Lock held by a Python process (Debian's python3-redis) with timeout=30 s; the
// process says "held", holds for `hold_s` seconds (forever when negative), releases and says
// "released". The name is passed as an argument, never pasted into the code.
std::unique_ptr<dlock::testing::child_process> redis_py_holder(const std::string& uri, const std::string& name,
                                                               double hold_s) {
  const auto u = dlock::uri::parse(uri);
  const std::string code = "import redis, sys, time\n"
                           "r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))\n"
                           "l = r.lock(sys.argv[3], timeout=30)\n"
                           "if not l.acquire(blocking=False): sys.exit(2)\n"
                           "print('held', flush=True)\n"
                           "hold = float(sys.argv[4])\n"
                           "time.sleep(hold if hold >= 0 else 3600)\n"
                           "l.release()\n"
                           "print('released', flush=True)\n";
  // Debian's interpreter, where python3-redis lives (a pyenv shim may come first on PATH).
  auto child = std::make_unique<dlock::testing::child_process>(
      std::vector<std::string>{"/usr/bin/python3", "-c", code, u.hosts()[0].host,
                               std::to_string(u.hosts()[0].port_or(6379)), name, std::to_string(hold_s)});
  EXPECT_EQ(child->read_line(20s), std::optional<std::string>("held")) << "the redis-py holder did not take " << name;
  return child;
}

// redis-py publishes nothing when it releases, so a waiter behind it can only find out by trying
// again: it does so at least every poll.max (400 ms here), whatever the holder's ttl (30 s). Each
// kind of waiter, on the name redis-py holds as a Lock, is granted within 5 s of the release 1 s in
// (sleeping the holder's PTTL it would try again 29 s later).
TEST(Redis, AWaiterBehindARedisPyLockTriesAgainAtPollMax) {
  using clock = std::chrono::steady_clock;
  const auto uri = server_uri("DLOCK_REDIS_URI");
  struct waiter_case {
    const char* what;
    const char* scheme;
    int kind;  // 0 mutex, 1 write, 2 read
  };
  for (const auto& w :
       {waiter_case{"redis:// mutex", "redis", 0}, waiter_case{"redis+reentrant:// mutex", "redis+reentrant", 0},
        waiter_case{"redis+fair:// mutex", "redis+fair", 0}, waiter_case{"writer", "redis", 1},
        waiter_case{"reader", "redis", 2}}) {
    SCOPED_TRACE(w.what);
    const auto name = unique_name("py-waiter");
    auto b = open_uri(with_scheme(uri, w.scheme) + "?ttl=10s&poll=100ms..400ms");
    auto holder = redis_py_holder(uri, name, 1.0);
    std::error_code ec;
    dlock::lease got;
    clock::time_point granted_at{};
    std::thread waiter([&] {
      if (w.kind == 0) {
        got = b->make_lock(name)->try_acquire_for(20s, ec);
      } else {
        got = b->make_rw_lock(name)->try_acquire_until(w.kind == 1 ? dlock::access::write : dlock::access::read,
                                                       dlock::distributed_lock::deadline_after(20s), ec);
      }
      granted_at = clock::now();
    });
    const auto released = holder->read_line(20s);
    const auto released_at = clock::now();
    waiter.join();
    EXPECT_EQ(released, std::optional<std::string>("released"));
    EXPECT_FALSE(ec) << dlock::last_error_message();
    ASSERT_TRUE(got) << "never granted";
    EXPECT_LT(granted_at - released_at, 5s) << "not granted within 5 s of redis-py's release (its key's ttl was 30 s)";
    EXPECT_EQ(holder->wait(10s), std::optional<int>(0)) << "the redis-py holder failed";
  }
}

// The scripts run on `name` as their first key (MONITOR), counted on a thread until stop(): while
// nothing is released or renewed, the acquire scripts of waiters.
class script_counter {
 public:
  script_counter(const std::string& uri, std::string name) : c_(raw_redis::connect(uri)), name_(std::move(name)) {
    freeReplyObject(redisCommand(c_.get(), "MONITOR"));
    thread_ = std::thread([this] {
      const timeval tv{0, 100000};
      redisSetTimeout(c_.get(), tv);
      while (!stop_) {
        void* r = nullptr;
        if (redisGetReply(c_.get(), &r) != REDIS_OK) {
          if (c_->err != REDIS_ERR_IO) return;  // anything but a read timeout ends the count
          c_->err = 0;
          continue;
        }
        reply_ptr line(static_cast<redisReply*>(r));
        if (line->type == REDIS_REPLY_STATUS && is_script_on_name(std::string_view(line->str, line->len))) ++count_;
      }
    });
  }
  ~script_counter() { stop(); }
  int stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return count_;
  }

 private:
  // A MONITOR line: `<time> [<db> <client>] "EVALSHA" "<sha>" "<numkeys>" "<key 1>" ...`.
  bool is_script_on_name(std::string_view line) const {
    std::vector<std::string> words;
    auto at = line.find("] \"");
    if (at == std::string_view::npos) return false;
    for (at += 2; words.size() < 4 && at < line.size() && line[at] == '"';) {
      std::string word;
      std::size_t i = at + 1;
      for (; i < line.size() && line[i] != '"'; ++i)
        word += line[i] == '\\' && i + 1 < line.size() ? line[++i] : line[i];
      words.push_back(std::move(word));
      at = i + 2;  // past the closing quote and the space
    }
    return words.size() == 4 && (words[0] == "EVALSHA" || words[0] == "EVAL") && words[3] == name_;
  }
  context_ptr c_;
  std::string name_;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::thread thread_;
};

// The waits behind each kind of holder, counted in acquire scripts over 2 s with poll.max 50 ms
// and ttls of 60 s: behind a redis-py Lock (no release message) the waiter tries every poll.max;
// behind a dlock holder (which publishes its release) it does not poll at all.
TEST(Redis, AWaiterPollsOnlyBehindAHolderThatPublishesNothing) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(uri + "?ttl=60s&poll=50ms..50ms");
  {
    const auto name = unique_name("quiet-holder");
    auto holder = redis_py_holder(uri, name, -1);
    script_counter count(uri, name);
    EXPECT_FALSE(b->make_lock(name)->try_acquire_for(2s));
    const int tries = count.stop();
    EXPECT_GE(tries, 10) << "behind redis-py, tries in 2 s with poll.max 50 ms";
    holder->kill_hard();
    cmd(raw_redis::connect(uri).get(), "DEL %b", name);
  }
  {
    const auto name = unique_name("loud-holder");
    auto held = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(held);
    script_counter count(uri, name);
    EXPECT_FALSE(b->make_lock(name)->try_acquire_for(2s));
    const int tries = count.stop();
    EXPECT_LE(tries, 4) << "behind a dlock holder, tries in 2 s (it publishes its release: no polling)";
  }
}

// atomic_set: a multi_lock's try is one script, whatever the size of the set: scripts counted by
// their first key, the set's first name has one and its other names none (taken member by member,
// each name would have a script of its own). The set's keys are redis-py's, each with its token.
TEST(Redis, ASetOfNamesIsTakenInOneScript) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(uri + "?ttl=60s");
  ASSERT_TRUE(b->caps().has(dlock::capability::atomic_set));
  const auto base = unique_name("set");
  // A server that has not run the script yet answers the first EVALSHA with NOSCRIPT, and the
  // script is sent again with its source: one more round trip, once per server. Loaded first.
  ASSERT_TRUE(b->make_multi_lock({base + "-load-a", base + "-load-b"})->try_acquire());
  const std::vector<std::string> names = {base + "-a", base + "-b", base + "-c"};
  script_counter first(uri, names[0]), second(uri, names[1]), third(uri, names[2]);
  auto set = b->make_multi_lock({names[2], names[0], names[1]});
  auto held = set->try_acquire();
  ASSERT_TRUE(held);
  auto c = raw_redis::connect(uri);
  for (const auto& n : names) {
    auto value = cmd(c.get(), "GET %b", n);
    ASSERT_EQ(value->type, REDIS_REPLY_STRING) << n << " was not set";
    EXPECT_EQ(std::string(value->str).rfind("dlock:", 0), 0u) << n << ": " << value->str;
  }
  // The monitor's lines come after the replies: one more command on each counter's server first.
  raw_redis::command(c.get(), {"PING"});
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(first.stop(), 1) << "the set's try was not one script";
  EXPECT_EQ(second.stop() + third.stop(), 0) << "the set's other names had scripts of their own";
  held.release();
  for (const auto& n : names) EXPECT_EQ(cmd(c.get(), "EXISTS %b", n)->integer, 0) << n << " stayed after the release";
}

TEST(Redis, ReentrantLayoutIsRedissons) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(with_scheme(uri, "redis+reentrant") + "?ttl=5s&client_id=11111111-2222-3333-4444-555555555555");
  const auto name = unique_name("redisson");
  auto lock = b->make_lock(name);
  auto first = lock->try_acquire();
  ASSERT_TRUE(first);
  auto again = lock->try_acquire();
  ASSERT_TRUE(again) << "reentrant";
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "another owner";
  auto c = raw_redis::connect(uri);
  EXPECT_EQ(std::string(cmd(c.get(), "TYPE %b", name)->str), "hash");
  auto all = cmd(c.get(), "HGETALL %b", name);
  ASSERT_EQ(all->elements, 2u);
  const std::string field(all->element[0]->str, all->element[0]->len);
  EXPECT_EQ(field.rfind("11111111-2222-3333-4444-555555555555:", 0), 0u) << field;
  EXPECT_EQ(std::string(all->element[1]->str), "2") << "re-entry count";
  EXPECT_GT(cmd(c.get(), "PTTL %b", name)->integer, 0);
  EXPECT_EQ(cmd(c.get(), "EXISTS redisson_lock_token:{%b}", name)->integer, 1) << "RFencedLock token key";
  // The unlock message: subscribe to Redisson's channel on a raw connection and release.
  auto sub = raw_redis::connect(uri);
  const auto channel = "redisson_lock__channel:{" + name + "}";
  freeReplyObject(redisCommand(sub.get(), "SUBSCRIBE %b", channel.data(), channel.size()));
  again.release();
  EXPECT_EQ(cmd(c.get(), "HGET %b", name + std::string(" ")).get() != nullptr, true);
  first.release();
  void* msg = nullptr;
  ASSERT_EQ(redisGetReply(sub.get(), &msg), REDIS_OK);
  reply_ptr m(static_cast<redisReply*>(msg));
  ASSERT_EQ(m->elements, 3u);
  EXPECT_EQ(std::string(m->element[0]->str), "message");
  EXPECT_EQ(std::string(m->element[1]->str, m->element[1]->len), channel);
  EXPECT_EQ(std::string(m->element[2]->str), "0") << "Redisson's UNLOCK_MESSAGE";
  EXPECT_EQ(cmd(c.get(), "EXISTS %b", name)->integer, 0);
}

TEST(Redis, HostileNames) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(uri + "?ttl=5s");
  const std::string names[] = {std::string("bin\0\xff\x01", 6),
                               "with spaces and\nnewline",
                               std::string(1024, 'k'),
                               "FLUSHALL",
                               "DEL *",
                               "*",
                               "{braces}",
                               "\"quoted'"};
  for (const auto& base : names) {
    const auto name = base + dlock::spi::random_token().substr(0, 6);
    auto l = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(l) << "name of " << name.size() << " bytes";
    EXPECT_FALSE(b->make_lock(name)->try_acquire());
    l.release();
  }
}

TEST(Redis, ClearErrors) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  const auto u = dlock::uri::parse(uri);
  const auto port = std::to_string(u.hosts()[0].port_or(6379));
  try {
    (void)open_uri("redis://dlock:not-the-password@127.0.0.1:" + port);
    ADD_FAILURE() << "wrong password accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::authentication_failed) << e.what();
    EXPECT_EQ(std::string(e.what()).find("not-the-password"), std::string::npos) << e.what();
  }
  try {
    (void)open_uri("redis://127.0.0.1:1?connect_timeout=300ms");
    ADD_FAILURE() << "unreachable server accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_unavailable) << e.what();
  }
}

// Raw connections to the first three masters of a redlock:// URI, once each has run for longer
// than `age` (an earlier test may have restarted one, and a master younger than a ttl is asked
// nothing: wait_after_restart).
std::vector<context_ptr> three_masters_older_than(const std::string& uri_text, std::chrono::seconds age) {
  const auto u = dlock::uri::parse(uri_text);
  std::vector<context_ptr> masters;
  for (int i = 0; i < 3; ++i) {
    const auto& h = u.hosts().at(i);
    context_ptr c(redisConnect(h.host.c_str(), h.port_or(6379)));
    EXPECT_TRUE(c && !c->err) << "cannot reach " << h.to_string();
    for (int tries = 0; c && tries < 100; ++tries) {
      reply_ptr info(static_cast<redisReply*>(redisCommand(c.get(), "INFO server")));
      const std::string text = info && info->type == REDIS_REPLY_STRING ? std::string(info->str, info->len) : "";
      const auto at = text.find("uptime_in_seconds:");
      if (at != std::string::npos && std::stoll(text.substr(at + 18)) > age.count()) break;
      std::this_thread::sleep_for(100ms);
    }
    masters.push_back(std::move(c));
  }
  return masters;
}

std::string value_of(redisContext* c, std::string_view key) {
  auto r = cmd(c, "GET %b", key);
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
}

// A Redlock grant may hold a bare majority: a split vote left one master with another client's
// key, or a master did not answer. Its renewals set the key where it is absent, and a master that
// never carried it counts: one master of the majority lost later costs the holder nothing. A
// master that lost the key (deleted, evicted) may have served another client in between and does
// not count; nor does any free master past the lease's validity, or without the delayed restart
// (a missing key may be a restart that forgot the grant).
TEST(Redlock, ARenewalCountsAFreeMasterOnlyIfItNeverCarriedTheKey) {
  const auto uri = server_uri("DLOCK_REDLOCK_URI");
  auto masters = three_masters_older_than(uri, 3s);
  ASSERT_EQ(masters.size(), 3u);
  dlock::lock_options by_hand;  // renewed only by the test
  by_hand.ttl = 2s;
  by_hand.watchdog = false;
  auto delayed_restart = dlock::default_registry().open(uri);  // wait_after_restart: the default
  const auto split_grant = [&](dlock::backend& b, const std::string& name) {
    cmd(masters[2].get(), "SET %b another-client PX 10000", name);  // the split vote's other side
    auto held = b.make_lock(name, by_hand)->try_acquire();
    EXPECT_TRUE(held) << "two of three masters are a majority";
    cmd(masters[2].get(), "DEL %b", name);  // ... which gave up
    return held;
  };

  const auto name = unique_name("redlock-split");
  auto held = split_grant(*delayed_restart, name);
  ASSERT_TRUE(held);
  const auto token = value_of(masters[0].get(), name);
  cmd(masters[1].get(), "DEL %b", name);  // lost on one master of the majority
  held.renew();                           // the first master kept it, the third never had it
  for (auto& m : masters) EXPECT_EQ(value_of(m.get(), name), token) << "the renewal set the key everywhere";

  const auto whole = unique_name("redlock-whole");
  auto whole_grant = delayed_restart->make_lock(whole, by_hand)->try_acquire();
  ASSERT_TRUE(whole_grant);
  cmd(masters[1].get(), "DEL %b", whole);
  cmd(masters[2].get(), "DEL %b", whole);
  std::error_code ec;
  whole_grant.renew(2s, ec);
  EXPECT_EQ(ec, dlock::errc::lock_lost) << "two masters that lost the key may have served another client";

  std::this_thread::sleep_for(2500ms);  // the first lease's validity over, every key expired
  held.renew(2s, ec);
  EXPECT_EQ(ec, dlock::errc::lock_lost) << "free masters after the validity ran out are no proof of holding";

  const auto unsafe_name = unique_name("redlock-split-unsafe");
  auto held_unsafely = split_grant(*open_uri(uri), unsafe_name);  // wait_after_restart=false
  ASSERT_TRUE(held_unsafely);
  cmd(masters[1].get(), "DEL %b", unsafe_name);
  held_unsafely.renew(2s, ec);
  EXPECT_EQ(ec, dlock::errc::lock_lost) << "without the delayed restart a free master may have restarted";
}

// Redlock stores a random token per grant on each master: inspect names the token a majority
// holds (a value on a minority is nobody's grant), list gives the names a majority holds, and
// force_release compare-and-deletes that token on every master, so the holder's release is
// not_owner.
TEST(Redlock, InspectNamesTheMajoritysTokenAndForceReleaseDeletesItEverywhere) {
  const auto uri = server_uri("DLOCK_REDLOCK_URI");
  auto masters = three_masters_older_than(uri, 3s);
  ASSERT_EQ(masters.size(), 3u);
  auto b = open_uri(uri);
  const auto base = unique_name("redlock-inspect");
  const auto name = base + "/held";
  dlock::lock_options o;
  o.ttl = 20s;
  o.watchdog = false;
  auto held = b->make_lock(name, o)->try_acquire();
  ASSERT_TRUE(held);
  const auto token = value_of(masters[0].get(), name);
  ASSERT_FALSE(token.empty());
  const auto minority = base + "/minority";
  cmd(masters[2].get(), "SET %b someone PX 20000", minority);

  const auto info = b->inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, token);
  ASSERT_TRUE(info.holders[0].ttl_left);
  EXPECT_LE(*info.holders[0].ttl_left, 20s);
  EXPECT_FALSE(b->inspect(minority).held) << "a value on one master of three is no grant";
  EXPECT_EQ(b->list(base), std::vector<std::string>{name});

  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, token);
  for (auto& m : masters) EXPECT_EQ(value_of(m.get(), name), "");
  EXPECT_EQ(value_of(masters[2].get(), minority), "someone") << "force_release of one name touched another";
  EXPECT_TRUE(b->list(base).empty());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  cmd(masters[2].get(), "DEL %b", minority);
}

TEST(Redlock, AcquiresWithAllMastersAndRefusesSecondOwner) {
  const auto uri = server_uri("DLOCK_REDLOCK_URI");
  auto b = open_uri(uri + "?ttl=5s");
  EXPECT_FALSE(b->caps().has(dlock::capability::fencing)) << "Redlock tokens are not monotonic across masters";
  const auto name = unique_name("redlock");
  auto l = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(l);
  EXPECT_FALSE(l.fencing_token());
  EXPECT_FALSE(b->make_lock(name)->try_acquire());
  l.release();
  EXPECT_TRUE(b->make_lock(name)->try_acquire());
}

}  // namespace

namespace {

TEST(Redis, FairLayoutIsRedissonsAndGrantsInArrivalOrder) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(with_scheme(uri, "redis+fair") + "?ttl=10s&fair_wait=20s");
  ASSERT_TRUE(b->caps().has(dlock::capability::fair));
  const auto name = unique_name("fair");
  auto holder = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(holder);
  std::mutex order_mutex;
  std::vector<int> order;
  auto first = b->make_lock(name), second = b->make_lock(name);
  auto wait_in_line = [&](dlock::distributed_lock& lock, int who) {
    auto l = lock.try_acquire_for(20s);
    {
      std::lock_guard g(order_mutex);
      order.push_back(l ? who : -who);
    }
    std::this_thread::sleep_for(50ms);
  };
  std::thread a([&] { wait_in_line(*first, 1); });
  std::this_thread::sleep_for(300ms);
  std::thread c([&] { wait_in_line(*second, 2); });
  std::this_thread::sleep_for(300ms);
  auto raw_c = raw_redis::connect(uri);
  auto queue = cmd(raw_c.get(), "LRANGE redisson_lock_queue:{%b} 0 -1", name);
  ASSERT_EQ(queue->elements, 2u) << "two waiters queued in Redisson's list";
  EXPECT_EQ(cmd(raw_c.get(), "ZCARD redisson_lock_timeout:{%b}", name)->integer, 2);
  EXPECT_EQ(std::string(cmd(raw_c.get(), "TYPE %b", name)->str), "hash");
  holder.release();
  a.join();
  c.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2})) << "granted in arrival order";
  EXPECT_EQ(cmd(raw_c.get(), "EXISTS redisson_lock_queue:{%b}", name)->integer, 0) << "queue drained";
}

}  // namespace

namespace {

// The connections of this process's backends on the server (each names itself dlock-<pid>): the
// suite's other tests, running at the same time, connect to the same server.
long long connected_clients(redisContext* c) {
  auto r = reply_ptr(static_cast<redisReply*>(redisCommand(c, "CLIENT LIST")));
  const std::string text(r->str, r->len);
  const auto ours = " name=dlock-" + std::to_string(::getpid()) + " ";
  long long n = 0;
  for (auto at = text.find(ours); at != std::string::npos; at = text.find(ours, at + 1)) ++n;
  return n;
}

TEST(Redis, ManyWaitersShareOneSubscriberConnection) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(uri + "?ttl=20s&pool_size=4&poll=20s..20s");
  auto c = raw_redis::connect(uri);
  const auto before = connected_clients(c.get());
  constexpr int waiters = 200;
  std::vector<std::string> names;
  std::vector<dlock::lease> held;
  for (int i = 0; i < waiters; ++i) {
    names.push_back(unique_name("many"));
    held.push_back(b->make_lock(names.back())->try_acquire());
    ASSERT_TRUE(held.back());
  }
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i)
    threads.emplace_back([&, i] {
      if (b->make_lock(names[i])->try_acquire_for(15s)) ++acquired;
    });
  std::this_thread::sleep_for(1s);
  const auto during = connected_clients(c.get());
  EXPECT_LE(during - before, 4 + 1) << "pool_size=4 plus one subscriber connection, whatever the number of waiters";
  held.clear();  // releases all: every waiter must be woken by its message
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquired.load(), waiters);
}

}  // namespace

namespace {

TEST(Redis, AclUserAndDatabaseSelection) {
  const auto acl = server_uri("DLOCK_REDIS_ACL_URI");
  auto b = open_uri(acl + "/3?ttl=5s");
  const auto name = unique_name("acl");
  auto l = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(l);
  auto c = raw_redis::connect(server_uri("DLOCK_REDIS_URI"));
  EXPECT_EQ(cmd(c.get(), "EXISTS %b", name)->integer, 0) << "not in db 0";
  freeReplyObject(redisCommand(c.get(), "SELECT 3"));
  EXPECT_EQ(cmd(c.get(), "EXISTS %b", name)->integer, 1) << "in db 3";
}

TEST(Redis, AServerThatIsNotRedisIsNamedAsSuch) {
  // A TCP server that answers like an HTTP server would.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread fake([listener] {
    const int s = ::accept(listener, nullptr, nullptr);
    const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    [[maybe_unused]] auto n = ::write(s, answer, sizeof answer - 1);
    std::this_thread::sleep_for(300ms);
    ::close(s);
  });
  try {
    (void)open_uri("redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "?command_timeout=1s");
    ADD_FAILURE() << "a non-Redis server was accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::backend_error) << e.what();
    EXPECT_NE(std::string(e.what()).find("Redis"), std::string::npos) << e.what();
  }
  fake.join();
  ::close(listener);
}

TEST(Redlock, ThreeMasters) {
  const auto uri = server_uri("DLOCK_REDLOCK_URI");
  const auto u = dlock::uri::parse(uri);
  ASSERT_GE(u.hosts().size(), 3u);
  // A previous test may have just restarted some masters: wait until each of the three answers.
  for (int i = 0; i < 3; ++i)
    for (int tries = 0; tries < 100; ++tries) {
      context_ptr c(redisConnect(u.hosts()[i].host.c_str(), u.hosts()[i].port_or(6379)));
      if (c && !c->err && reply_ptr(static_cast<redisReply*>(redisCommand(c.get(), "PING")))) break;
      std::this_thread::sleep_for(50ms);
    }
  std::string three = "redlock://";
  for (int i = 0; i < 3; ++i) three += (i ? "," : "") + u.hosts()[i].to_string();
  auto b = open_uri(three + "?ttl=5s");
  const auto name = unique_name("redlock3");
  auto l = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(l);
  EXPECT_FALSE(b->make_lock(name)->try_acquire());
  // Each of the three masters holds the redis-py-layout key with our ttl.
  for (int i = 0; i < 3; ++i) {
    context_ptr c(redisConnect(u.hosts()[i].host.c_str(), u.hosts()[i].port_or(6379)));
    ASSERT_TRUE(c && !c->err) << u.hosts()[i].to_string();
    auto pttl = cmd(c.get(), "PTTL %b", name);
    ASSERT_TRUE(pttl) << u.hosts()[i].to_string();
    EXPECT_GT(pttl->integer, 0) << "key missing on " << u.hosts()[i].to_string();
  }
  l.release();
}

}  // namespace

namespace {

TEST(RedisInspection, InspectReadsTheKeyAndForceReleaseDeletesIt) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(uri);
  const auto name = unique_name("inspect");
  EXPECT_FALSE(b->inspect(name).held);
  dlock::lock_options o;
  o.ttl = 30s;
  o.watchdog = false;
  auto stuck = b->make_lock(name, o);
  auto held = stuck->try_acquire();
  ASSERT_TRUE(held);

  auto c = raw_redis::connect(uri);
  auto value = cmd(c.get(), "GET %b", name);
  const std::string token(value->str, value->len);
  const auto info = b->inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, token) << "redis:// records the grant's token, not the owner id";
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::mutex);
  EXPECT_EQ(info.holders[0].fencing_token, held.fencing_token());
  ASSERT_TRUE(info.holders[0].ttl_left);
  EXPECT_LE(*info.holders[0].ttl_left, 30s);
  EXPECT_FALSE(info.waiters_known);

  const auto names = b->list(name);
  EXPECT_EQ(names, std::vector<std::string>{name}) << "list shows the lock's key, not its counter";

  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, token);
  EXPECT_EQ(cmd(c.get(), "EXISTS %b", name)->integer, 0);
  EXPECT_TRUE(b->make_lock(name)->try_acquire());
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(RedisInspection, FairQueueGivesTheWaitersAndReentrantTheOwnerField) {
  const auto uri = server_uri("DLOCK_REDIS_URI");
  auto b = open_uri(with_scheme(uri, "redis+fair"));
  const auto name = unique_name("inspect-fair");
  auto holder_lock = b->make_lock(name);
  auto held = holder_lock->try_acquire();
  ASSERT_TRUE(held);
  auto waiting_lock = b->make_lock(name);
  std::thread waiter([&] { (void)waiting_lock->try_acquire_for(10s); });
  dlock::lock_info info;
  for (int i = 0; i < 1000 && info.waiters.empty(); ++i) {  // until the waiter has queued (hang guard)
    info = b->inspect(name);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::mutex);
  EXPECT_FALSE(info.holders[0].owner.empty());
  EXPECT_TRUE(info.waiters_known);
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_NE(info.waiters[0].owner, info.holders[0].owner);
  held.release();
  waiter.join();
}

}  // namespace
