// The well-known broken Redis lock recipes (src/unsafe.hpp) against a real server (DLOCK_REDIS_URI):
// each test makes the failure each recipe is known for happen, and runs redis:// through the same scenario
// to show it does not. The server is read directly with hiredis, so no test trusts the code under
// test about what the server holds.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <barrier>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/slow_holder.hpp"
#include "dlock_test/support.hpp"
#include "raw_redis.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

std::string server_uri() { return dlock::testing::server_uri("DLOCK_REDIS_URI"); }

// The server's URI under another scheme, with `query` appended.
std::string uri_of(std::string_view scheme, std::string_view query) {
  return dlock::testing::with_query(dlock::testing::with_scheme(server_uri(), scheme), query);
}

std::shared_ptr<dlock::backend> open_uri(const std::string& text) { return dlock::default_registry().open(text); }

std::string unique(std::string_view what) {
  return dlock::testing::unique_name("dlock-test-unsafe-" + std::string(what));
}

using dlock::testing::raw_redis::reply_ptr;

// A direct connection to the server that deletes the test's key when the test ends, however it ends.
class raw_key {
 public:
  explicit raw_key(std::string key) : key_(std::move(key)), c_(dlock::testing::raw_redis::connect(server_uri())) {}
  ~raw_key() { (void)command("DEL"); }
  raw_key(const raw_key&) = delete;
  raw_key& operator=(const raw_key&) = delete;

  reply_ptr command(const char* verb) {
    return reply_ptr(static_cast<redisReply*>(redisCommand(c_.get(), "%s %b", verb, key_.data(), key_.size())));
  }
  long long integer(const char* verb) {
    auto r = command(verb);
    EXPECT_TRUE(r && r->type == REDIS_REPLY_INTEGER) << verb << " " << key_;
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
  }
  bool exists() { return integer("EXISTS") == 1; }
  long long ttl_ms() { return integer("PTTL"); }  // -1: no expiry, -2: no key
  std::string value() {
    auto r = command("GET");
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }
  void set(std::string_view value) {
    reply_ptr(static_cast<redisReply*>(
        redisCommand(c_.get(), "SET %b %b", key_.data(), key_.size(), value.data(), value.size())));
  }
  // Polls (bounded) until the key exists or is gone.
  bool wait_until_exists(bool wanted, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (exists() != wanted) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

 private:
  std::string key_;
  dlock::testing::raw_redis::context_ptr c_;
};

using dlock::testing::slow_holder_outcome;
using dlock::testing::unrenewed_options;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* const unsafe_schemes[] = {"redis+unsafe-setnx-expire", "redis+unsafe-getset", "redis+unsafe-del",
                                      "redis+unsafe-incr"};

TEST(RedisUnsafe, RefusedUnlessTheUriSaysUnsafeTrue) {
  for (const char* scheme : unsafe_schemes) {
    for (const char* query : {"", "unsafe=false"}) {
      try {
        (void)open_uri(uri_of(scheme, query));
        ADD_FAILURE() << scheme << " opened without unsafe=true";
      } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << e.what();
        EXPECT_NE(std::string(e.what()).find("UNSAFE"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("unsafe=true"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(open_uri(uri_of(scheme, "unsafe=true"))) << scheme;
    // The refusal names the URI, redacted.
    const auto with_password = "dlock:S3cr3tPw@" + server_uri().substr(server_uri().find("://") + 3);
    try {
      (void)open_uri(std::string(scheme) + "://" + with_password);
      ADD_FAILURE() << scheme << " opened without unsafe=true";
    } catch (const dlock::error& e) {
      EXPECT_EQ(std::string(e.what()).find("S3cr3tPw"), std::string::npos) << e.what();
    }
  }
}

TEST(RedisUnsafe, ListedAsUnsafeWithoutFencingRenewalOrNotification) {
  int found = 0;
  for (const auto& info : dlock::default_registry().list()) {
    if (info.scheme.find("unsafe") == std::string::npos || !info.scheme.starts_with("redis+")) continue;
    ++found;
    EXPECT_TRUE(info.summary.starts_with("UNSAFE:")) << info.scheme << ": " << info.summary;
    EXPECT_NE(info.example_uri.find("unsafe=true"), std::string::npos) << info.example_uri;
    for (auto c : {dlock::capability::fencing, dlock::capability::renewable, dlock::capability::lost_notification,
                   dlock::capability::blocking, dlock::capability::fair, dlock::capability::reentrant})
      EXPECT_FALSE(info.caps.has(c)) << info.scheme << " declares " << dlock::to_string(c);
  }
  EXPECT_EQ(found, 4);
}

// A holder process of `scheme` (a two-command recipe) runs `hold` on `name`, sleeping between its
// two acquire commands (unsafe_pause_between), and is SIGKILLed there as soon as the first
// command's key is on the server. Then nobody gets the lock for 3 ttls, and the key still has no ttl.
void expect_a_kill_between_the_commands_holds_forever(const char* scheme, const std::string& name, raw_key& key) {
  const auto uri = uri_of(scheme, "unsafe=true&unsafe_pause_between=60s");
  {
    dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold", uri, name, "1000"});
    ASSERT_TRUE(key.wait_until_exists(true, 15s)) << "the holder never sent its first command";
    EXPECT_EQ(key.ttl_ms(), -1) << "the key has a ttl before the second command";
    holder.kill_hard();
    EXPECT_EQ(holder.wait(10s), 128 + SIGKILL);
  }
  auto b = open_uri(uri);
  auto lock = b->make_lock(name, unrenewed_options(*b, 1000ms));
  EXPECT_FALSE(lock->try_acquire_for(3s)) << "the lock freed itself after the holder died";
  EXPECT_EQ(key.ttl_ms(), -1) << "the key of the dead holder got a ttl";
}

void expect_free_after_ttl(const std::string& uri, const std::string& name) {
  dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold", uri, name, "1000"});
  const auto line = holder.read_line(15s);
  ASSERT_TRUE(line && line->starts_with("acquired")) << "the holder did not acquire";
  holder.kill_hard();
  (void)holder.wait(10s);
  auto b = open_uri(uri);
  auto lock = b->make_lock(name, unrenewed_options(*b, 1000ms));
  EXPECT_TRUE(lock->try_acquire_for(10s)) << "the dead holder's lock did not free itself after its ttl (1s)";
}

TEST(RedisUnsafe, SetnxExpireHolderKilledBetweenTheCommandsHoldsTheLockForever) {
  const auto name = unique("setnx-expire");
  raw_key key(name);
  expect_a_kill_between_the_commands_holds_forever("redis+unsafe-setnx-expire", name, key);
}

TEST(RedisUnsafe, IncrHolderKilledBetweenTheCommandsHoldsTheLockForever) {
  const auto name = unique("incr");
  raw_key key(name);
  expect_a_kill_between_the_commands_holds_forever("redis+unsafe-incr", name, key);
  // Every attempt since counted itself in: the counter only grows, and never expires.
  EXPECT_GT(std::stoll(key.value()), 1);
}

TEST(RedisUnsafe, SafeSchemeHolderKilledIsFreeAfterItsTtl) {
  const auto name = unique("safe-kill");
  raw_key key(name);
  expect_free_after_ttl(uri_of("redis", "wait_after_restart=false"), name);
}

// A's grant (500 ms) runs out while A still works (no watchdog); B is granted; A releases; C tries.
slow_holder_outcome slow_holder_releases_after_expiry(const std::string& uri, const std::string& name, raw_key& key) {
  auto b = open_uri(uri);
  return dlock::testing::slow_holder_releases_after_expiry(
      *b, name, 500ms, [&] { EXPECT_TRUE(key.wait_until_exists(false, 10s)) << "A's key did not expire"; });
}

TEST(RedisUnsafe, DelReleaseOfAnExpiredHolderDeletesTheSuccessorsLock) {
  const auto name = unique("del");
  raw_key key(name);
  const auto out = slow_holder_releases_after_expiry(uri_of("redis+unsafe-del", "unsafe=true"), name, key);
  EXPECT_FALSE(out.a_release) << "A's plain DEL found a key to delete (B's), so it reports success: "
                              << out.a_release.message();
  EXPECT_TRUE(out.c_granted_while_b_holds) << "C was not granted while B held: no overlap";
}

// The two-command schemes release by the same plain DEL (SETNX then EXPIRE, and the INCR
// lock: "incr的实现方式也无法解决锁被误删除的问题").
TEST(RedisUnsafe, SetnxExpireAndIncrReleaseOfAnExpiredHolderAlsoDeletesTheSuccessorsLock) {
  for (const char* scheme : {"redis+unsafe-setnx-expire", "redis+unsafe-incr"}) {
    const auto name = unique("two-command-del");
    raw_key key(name);
    const auto out = slow_holder_releases_after_expiry(uri_of(scheme, "unsafe=true"), name, key);
    EXPECT_FALSE(out.a_release) << scheme << ": " << out.a_release.message();
    EXPECT_TRUE(out.c_granted_while_b_holds) << scheme << ": C was not granted while B held: no overlap";
  }
}

TEST(RedisUnsafe, SafeSchemeReleaseOfAnExpiredHolderIsNotOwnerAndKeepsTheSuccessor) {
  const auto name = unique("safe-del");
  raw_key key(name);
  const auto out = slow_holder_releases_after_expiry(uri_of("redis", "wait_after_restart=false"), name, key);
  EXPECT_EQ(out.a_release, dlock::errc::not_owner) << out.a_release.message();
  EXPECT_FALSE(out.c_granted_while_b_holds) << "C was granted while B held";
}

// Two clients race to take over an expired lock, many rounds. The recipe's compare (GETSET must
// return the value GET read) lets only one of them in; what the loser's GETSET still does is
// rewrite the winner's expiry with its own ("the expiry may be overwritten by several clients' GETSETs").
// The racers use different ttls (30 s and 60 s) so the value shows whose expiry it is.
TEST(RedisUnsafe, GetsetTakeoverRaceLoserRewritesTheWinnersExpiry) {
  const auto name = unique("getset-race");
  raw_key key(name);
  const auto uri = uri_of("redis+unsafe-getset", "unsafe=true");
  const milliseconds ttls[2] = {30s, 60s};
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  std::vector<std::shared_ptr<dlock::backend>> backends;
  for (auto ttl : ttls) {
    backends.push_back(open_uri(uri));  // one connection pool per racer, as two processes would have
    locks.push_back(backends.back()->make_lock(name, unrenewed_options(*backends.back(), ttl)));
  }
  constexpr int rounds = 300;
  int double_grants = 0, no_grant = 0, rewritten = 0;
  for (int round = 0; round < rounds; ++round) {
    key.set(std::to_string(wall_ms() - 1000));  // a holder whose expiry passed a second ago
    dlock::lease leases[2];
    std::barrier start(2);
    std::vector<std::jthread> racers;
    for (int i = 0; i < 2; ++i)
      racers.emplace_back([&, i] {
        start.arrive_and_wait();
        leases[i] = locks[i]->try_acquire();
      });
    racers.clear();  // joins
    const int granted = (leases[0] ? 1 : 0) + (leases[1] ? 1 : 0);
    if (granted == 2) ++double_grants;
    if (granted == 0) ++no_grant;
    if (granted == 1) {
      const int winner = leases[0] ? 0 : 1;
      const auto left = std::stoll(key.value()) - wall_ms();
      const bool loser_expiry = winner == 0 ? left > 45'000 : left < 45'000;
      if (loser_expiry) ++rewritten;
    }
    for (auto& l : leases) {
      std::error_code ignored;
      l.release(ignored);
    }
  }
  std::cout << "getset takeover race, " << rounds << " rounds: " << double_grants << " double grants, " << no_grant
            << " rounds without a grant, " << rewritten << " rounds where the loser rewrote the winner's expiry\n";
  EXPECT_EQ(double_grants, 0) << "the GETSET compare let two racers in";
  EXPECT_GT(rewritten, 0) << "no losing GETSET ever rewrote the winner's expiry in " << rounds << " rounds";
}

// libfaketime (Debian's faketime package) preloaded into the other client: its clock reads
// `offset` ahead. Through env(1), which execs, so the pid the test kills is the client's.
std::vector<std::string> with_clock_ahead(std::string_view offset, std::vector<std::string> argv) {
  const char* candidates[] = {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                              "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                              "/usr/lib/faketime/libfaketime.so.1"};
  std::string lib;
  for (const char* c : candidates)
    if (std::filesystem::exists(c)) lib = c;
  EXPECT_FALSE(lib.empty()) << "libfaketime is not installed (apt-get install faketime)";
  std::vector<std::string> out{"/usr/bin/env", "LD_PRELOAD=" + lib, "FAKETIME=" + std::string(offset),
                               "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// This process holds the lock for 20 s; a client whose clock is 60 s ahead tries to take it for
// up to `patience`. Returns whether it was granted while this holder's lease was still valid.
bool client_with_clock_ahead_takes_a_live_lock(const std::string& uri, const std::string& name, milliseconds patience) {
  auto b = open_uri(uri);
  auto holder_lock = b->make_lock(name, unrenewed_options(*b, 20s));
  auto held = holder_lock->try_acquire();
  EXPECT_TRUE(held) << "the holder was not granted a free lock";
  dlock::testing::child_process skewed(
      with_clock_ahead("+60s", {DLOCK_CONFORMANCE_WORKER, "hold", uri, name, "20000"}));
  const auto line = skewed.read_line(patience);
  const bool granted = line && line->starts_with("acquired");
  EXPECT_GT(held.remaining(), 0ms) << "the holder's own validity ran out: the test proves nothing";
  return granted;
}

TEST(RedisUnsafe, GetsetClientWithClockAheadTakesOverALiveLock) {
  const auto name = unique("getset-skew");
  raw_key key(name);
  EXPECT_TRUE(client_with_clock_ahead_takes_a_live_lock(uri_of("redis+unsafe-getset", "unsafe=true"), name, 10s))
      << "the client 60 s ahead was not granted the lock held for another 20 s";
}

TEST(RedisUnsafe, SafeSchemeClientWithClockAheadWaits) {
  const auto name = unique("safe-skew");
  raw_key key(name);
  EXPECT_FALSE(client_with_clock_ahead_takes_a_live_lock(uri_of("redis", "wait_after_restart=false"), name, 4s))
      << "the client 60 s ahead was granted a lock held for another 20 s";
}

}  // namespace
