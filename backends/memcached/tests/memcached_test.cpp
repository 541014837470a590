// memcached:// against a real server (DLOCK_MEMCACHED_URI, e.g. from compose/native/dlock-servers).
// Each test reads the server directly with raw libmemcached, so it does not trust the code under test.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_pool.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/support.hpp"

using namespace std::chrono_literals;
namespace mc = dlock::memcached;

namespace {

// A lease of `ttl` without the watchdog (assigned fields: GCC's -Wmissing-field-initializers
// flags a designated initializer that leaves out renew_every and owner).
dlock::lock_options without_watchdog(std::chrono::milliseconds ttl) {
  dlock::lock_options o;
  o.ttl = ttl;
  o.watchdog = false;
  return o;
}

std::string server_uri() { return dlock::testing::server_uri("DLOCK_MEMCACHED_URI"); }

using dlock::testing::unique_name;

struct raw_client {
  dlock::uri u;
  mc::memc_ptr m;
  explicit raw_client(const std::string& text)
      : u(dlock::uri::parse(text)), m(mc::make_handle(u, 2s, 2s)) {}
  std::optional<mc::item> get(std::string_view name) {
    const auto k = mc::keys_for("dlock:", name);
    memcached_return_t rc;
    auto it = mc::gets(m.get(), k, k.lock, rc);
    EXPECT_TRUE(rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND) << memcached_strerror(m.get(), rc);
    return it;
  }
  void set(std::string_view name, std::string_view value) {
    const auto k = mc::keys_for("dlock:", name);
    const auto rc = memcached_set_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(),
                                         value.data(), value.size(), 30, 0);
    ASSERT_EQ(rc, MEMCACHED_SUCCESS) << memcached_strerror(m.get(), rc);
  }
};

// The tests below that are not about the restart delay switch it off: the launcher's servers are
// freshly started (and restarted by fault tests), and would grant nothing for their first seconds.
std::shared_ptr<dlock::backend> open_backend(std::string_view query = "ttl=2s&restart_delay=off") {
  return dlock::open(server_uri() + "?" + std::string(query));
}

}  // namespace

TEST(memcached, UnreachableServerFailsAtOpenWithBackendUnavailable) {
  try {
    (void)dlock::open("memcached://127.0.0.1:1?ttl=2s");
    FAIL() << "open of a closed port succeeded";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::make_error_code(dlock::errc::backend_unavailable)) << e.what();
  }
}

// A regression: memcached://:11211 (a templated ${HOST} left unset) silently meant localhost.
TEST(memcached, AnEmptyHostIsRefusedNotTakenForLocalhost) {
  try {
    (void)dlock::open("memcached://:" + std::to_string(dlock::uri::parse(server_uri()).hosts().at(0).port_or(11211)));
    FAIL() << "a URI with an empty host was opened";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::make_error_code(dlock::errc::invalid_uri)) << e.what();
  }
}

TEST(memcached, SecondOwnerIsRefusedWhileHeld) {
  auto b = open_backend();
  const auto name = unique_name("excl");
  auto a = b->make_lock(name), c = b->make_lock(name);
  auto held = a->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(c->try_acquire());
  held.release();
  EXPECT_TRUE(c->try_acquire());
}

TEST(memcached, ReleaseReallyDeletesTheItem) {
  auto b = open_backend();
  raw_client raw(server_uri());
  const auto name = unique_name("del");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  ASSERT_TRUE(raw.get(name).has_value());
  held.release();
  EXPECT_FALSE(raw.get(name).has_value()) << "the item survived a release (binary protocol CAS trap?)";
}

TEST(memcached, ReleaseByAFormerOwnerLeavesTheNewHoldersItem) {
  auto b = open_backend();
  raw_client raw(server_uri());
  const auto name = unique_name("nonowner");
  auto held = b->make_lock(name, without_watchdog(2s))->try_acquire();
  ASSERT_TRUE(held);
  // Our grant expired and someone else took the lock: the item now carries their token.
  raw.set(name, "someone-else");
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::make_error_code(dlock::errc::not_owner));
  const auto after = raw.get(name);
  ASSERT_TRUE(after.has_value()) << "a non-owner's release deleted the new holder's item";
  EXPECT_EQ(after->value, "someone-else");
}

TEST(memcached, RenewIsCasGuarded) {
  auto b = open_backend();
  raw_client raw(server_uri());
  const auto name = unique_name("renew");
  auto held = b->make_lock(name, without_watchdog(2s))->try_acquire();
  ASSERT_TRUE(held);
  held.renew(2s);  // ours: succeeds
  raw.set(name, "someone-else");
  std::error_code ec;
  held.renew(2s, ec);
  EXPECT_EQ(ec, dlock::make_error_code(dlock::errc::not_owner));
  EXPECT_TRUE(held.lost_token().stop_requested());
  EXPECT_EQ(raw.get(name)->value, "someone-else");
}

TEST(memcached, AnExpiredGrantFreesTheLock) {
  auto b = open_backend("ttl=1s&watchdog=false&restart_delay=off");
  const auto name = unique_name("expiry");
  auto holder = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(holder);
  // ttl 1s -> exptime 2s on the server: gone after at most 2s. Bounded wait, not a timing claim.
  auto next = b->make_lock(name)->try_acquire_for(6s);
  EXPECT_TRUE(next);
}

TEST(memcached, FencingTokensIncreasePerGrant) {
  auto b = open_backend();
  const auto name = unique_name("fence");
  auto lock = b->make_lock(name);
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto l = lock->try_acquire();
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.fencing_token().has_value());
    EXPECT_GT(*l.fencing_token(), last);
    last = *l.fencing_token();
  }
}

TEST(memcached, NamesMemcachedCannotStoreAreHashedWithoutCollisions) {
  const std::string long_a(300, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';
  const std::set<std::string> keys{mc::keys_for("dlock:", "a b").lock, mc::keys_for("dlock:", "a_b").lock,
                                   mc::keys_for("dlock:", long_a).lock, mc::keys_for("dlock:", long_b).lock,
                                   mc::keys_for("dlock:", "a\nb").lock, mc::keys_for("dlock:", "#a").lock};
  EXPECT_EQ(keys.size(), 6u);
  for (const auto& k : keys) {
    EXPECT_LE(k.size(), mc::max_key_bytes);
    for (unsigned char c : k) EXPECT_TRUE(c > 0x20 && c < 0x7f) << k;
  }
  auto b = open_backend();
  const auto base = unique_name("long");
  auto x = b->make_lock(base + long_a)->try_acquire();
  auto y = b->make_lock(base + long_b)->try_acquire();
  auto z = b->make_lock(base + " with space")->try_acquire();
  EXPECT_TRUE(x);
  EXPECT_TRUE(y) << "two distinct long names shared one key";
  EXPECT_TRUE(z);
}

TEST(memcached, TtlIsWholeSecondsRoundedUpNeverZero) {
  EXPECT_EQ(mc::exptime_for(1ms), 2);
  EXPECT_EQ(mc::exptime_for(0ms), 2);
  EXPECT_EQ(mc::exptime_for(1000ms), 2);
  EXPECT_EQ(mc::exptime_for(1001ms), 3);
}

TEST(memcached, OutOfBandDeleteFiresLost) {
  auto b = open_backend("ttl=1500ms&restart_delay=off");
  raw_client raw(server_uri());
  const auto name = unique_name("lost");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  const auto k = mc::keys_for("dlock:", name);
  ASSERT_EQ(memcached_delete_by_key(raw.m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0),
            MEMCACHED_SUCCESS);
  for (int i = 0; i < 100 && !held.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "the watchdog's renewal did not notice the deleted item";
}

// memcached reads an expiry over 30 days as an absolute unix time: a ttl that long used to become
// an exptime in 1970, an item expired at once, and a second owner got the lock while the first held it.
TEST(memcached, ATtlOverThirtyDaysIsRefusedInsteadOfExpiringAtOnce) {
  using days = std::chrono::days;
  auto b = open_backend();
  const auto name = unique_name("longttl");
  try {
    auto first = b->make_lock(name, without_watchdog(days{31}));
    auto held = first->try_acquire();
    ASSERT_TRUE(held);
    EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "a 31-day grant let a second owner in at once";
    FAIL() << "a ttl over 30 days was accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("30 days"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)dlock::open(server_uri() + "?ttl=744h"), dlock::error);  // 31 days
  // The longest ttl that fits is granted and excludes a second owner.
  auto longest = b->make_lock(name, without_watchdog(mc::max_ttl))->try_acquire();
  ASSERT_TRUE(longest);
  EXPECT_FALSE(b->make_lock(name)->try_acquire());
  std::error_code ec;
  longest.renew(days{31}, ec);
  EXPECT_EQ(ec, dlock::errc::invalid_argument) << ec.message();
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "a refused renewal dropped the grant";
}

// --- restarts, evictions and lost replies (the launcher's memcached process) ---

namespace {

// Starts the server again at scope exit if the test stopped it (even when an ASSERT failed).
struct started_at_exit {
  bool stopped = false;
  ~started_at_exit() {
    if (stopped) {
      EXPECT_EQ(dlock::testing::run_launcher("start memcached"), 0);
    }
  }
};

// SIGCONT at scope exit for a server the test froze.
struct thawed_at_exit {
  pid_t pid = -1;
  ~thawed_at_exit() {
    if (pid > 0) ::kill(pid, SIGCONT);
  }
};

mc::server_clock clock_of(raw_client& raw, std::string_view name) {
  memcached_return_t rc;
  const auto clock = mc::read_server_clock(raw.m.get(), mc::keys_for("dlock:", name), rc);
  EXPECT_TRUE(clock) << memcached_strerror(raw.m.get(), rc);
  return clock.value_or(mc::server_clock{});
}

// A server that was (re)started moments ago grants nothing until min_uptime_to_grant(ttl).
constexpr auto young_server_wait = 30s;

}  // namespace

TEST(memcached, MinUptimeToGrantCoversTheTtlAndTheServerClock) {
  EXPECT_EQ(mc::min_uptime_to_grant(2s), 8s);    // the clock's 5 s rule + memcached's 3 s
  EXPECT_EQ(mc::min_uptime_to_grant(30s), 34s);  // exptime 31 s + 3 s
  EXPECT_EQ(mc::min_uptime_to_grant(1500ms), 8s);
  EXPECT_EQ(mc::fence_seed(1s), std::uint64_t{1} << 20);
}

// A regression: a restart used to reset the counter (tokens from 1 again) and the restarted server
// granted at once, while the holder from before still believed it held.
TEST(memcached, ARestartedServerGrantsOnlyAfterTheOldHolderWasToldAndWithAHigherToken) {
  const auto base = server_uri();
  const auto name = unique_name("restart");
  auto before = dlock::open(base + "?ttl=2s");
  dlock::lease held;
  for (int i = 0; i < 3; ++i) {  // token a is not the counter's first: a reset to 1 shows
    if (held) held.release();
    held = before->make_lock(name)->try_acquire_for(young_server_wait);
    ASSERT_TRUE(held) << "no grant on the running server";
  }
  const auto a = held.fencing_token();
  ASSERT_TRUE(a);

  started_at_exit restart;
  ASSERT_EQ(dlock::testing::run_launcher("stop memcached"), 0);
  restart.stopped = true;
  ASSERT_EQ(dlock::testing::run_launcher("start memcached"), 0);
  restart.stopped = false;
  const auto restarted = std::chrono::steady_clock::now();

  auto after = dlock::open(base + "?ttl=2s");  // another client
  auto lock = after->make_lock(name);
  EXPECT_FALSE(lock->try_acquire()) << "the restarted server granted at once, inside the old holder's validity";
  auto next = lock->try_acquire_for(young_server_wait);
  const bool told_first = held.lost_token().stop_requested();
  ASSERT_TRUE(next) << "no grant within " << young_server_wait.count() << " s of the restart";
  const auto granted_after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted);
  EXPECT_TRUE(told_first) << "the old holder's lost_token had not fired when the new holder was granted";
  ASSERT_TRUE(next.fencing_token());
  EXPECT_GT(*next.fencing_token(), *a) << "the fencing token went back after the restart";
  std::cout << "token before the restart " << *a << ", after " << *next.fencing_token() << "; granted "
            << granted_after.count() << " ms after the restart\n";
}

// A regression: an evicted (here: deleted) counter was re-created at 0, so tokens went back to 1.
TEST(memcached, FencingTokensIncreaseAfterTheCounterIsEvicted) {
  const auto base = server_uri();
  raw_client raw(base);
  const auto name = unique_name("evicted");
  auto b = dlock::open(base + "?ttl=2s");
  auto lock = b->make_lock(name);
  std::uint64_t a = 0;
  for (int i = 0; i < 3; ++i) {
    auto held = lock->try_acquire_for(young_server_wait);
    ASSERT_TRUE(held);
    a = *held.fencing_token();
  }
  const auto seeded_by = clock_of(raw, name).unix_time;
  // The README's assumption: a counter is not lost in the second it was created in (two counters
  // created in one server second would start equal). Bounded wait for the server's next second.
  for (int i = 0; i < 60 && clock_of(raw, name).unix_time <= seeded_by; ++i) std::this_thread::sleep_for(100ms);
  const auto k = mc::keys_for("dlock:", name);
  ASSERT_EQ(memcached_delete_by_key(raw.m.get(), k.group.data(), k.group.size(), k.fence.data(), k.fence.size(), 0),
            MEMCACHED_SUCCESS);
  auto held = lock->try_acquire_for(young_server_wait);
  ASSERT_TRUE(held);
  EXPECT_GT(*held.fencing_token(), a) << "the fencing token went back after the counter was lost";
}

// A regression: an `add` whose reply was lost (the server stalled past command_timeout, then read the
// request) left a grant that nobody held: the name stayed taken for a whole ttl.
TEST(memcached, AnAcquireWhoseReplyWasLostLeavesNoGrantBehind) {
  const auto base = server_uri();
  raw_client raw(base);
  const auto name = unique_name("lostreply");
  auto b = dlock::open(base + "?ttl=60s&command_timeout=300ms&restart_delay=off");
  ASSERT_TRUE(b->make_lock(unique_name("warm"))->try_acquire());  // a connection in the pool
  {
    thawed_at_exit thaw;
    thaw.pid = dlock::testing::launcher_pid("memcached");
    ASSERT_GT(thaw.pid, 0);
    ASSERT_EQ(::kill(thaw.pid, SIGSTOP), 0);
    std::error_code ec;
    EXPECT_FALSE(b->make_lock(name)->try_acquire(ec));
    EXPECT_EQ(ec, dlock::errc::backend_unavailable) << ec.message();
  }  // SIGCONT: the server now reads the `add` and stores the grant
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // 10 s, far below the grant's 61 s
    std::this_thread::sleep_for(100ms);
    gone = !raw.get(name).has_value();
  }
  EXPECT_TRUE(gone) << "the grant of an acquire that failed stayed on the server";
  auto other = dlock::open(base + "?ttl=2s&restart_delay=off");
  EXPECT_TRUE(other->make_lock(name)->try_acquire_for(5s)) << "the name stayed taken by a grant nobody holds";
}

// --- several servers: memcached-ring from the launcher (DLOCK_MEMCACHED_RING_URI, two servers) ---

namespace {

std::string ring_uri() { return dlock::testing::server_uri("DLOCK_MEMCACHED_RING_URI"); }

// One raw client per server of the ring, each knowing only its own server: where an item really
// is does not depend on the hashing under test.
std::vector<std::unique_ptr<raw_client>> one_client_per_server(const std::string& ring) {
  std::vector<std::unique_ptr<raw_client>> out;
  for (const auto& h : dlock::uri::parse(ring).hosts())
    out.push_back(std::make_unique<raw_client>("memcached://" + h.host + ":" + std::to_string(h.port_or(11211))));
  return out;
}

bool fence_on(raw_client& c, std::string_view name) {
  const auto k = mc::keys_for("dlock:", name);
  memcached_return_t rc;
  return mc::gets(c.m.get(), k, k.fence, rc).has_value();
}

}  // namespace

// Consistent hashing: every name lives on exactly one server (its lock item and its fencing
// counter together), and names spread over the servers.
TEST(memcached_ring, EachNameLivesOnExactlyOneServerAndNamesSpread) {
  const auto ring = ring_uri();
  auto servers = one_client_per_server(ring);
  ASSERT_EQ(servers.size(), 2u);
  auto b = dlock::open(ring + "?ttl=10s&restart_delay=off");
  std::vector<int> per_server(servers.size(), 0);
  std::vector<dlock::lease> held;
  for (int i = 0; i < 40; ++i) {
    const auto name = unique_name("ring-" + std::to_string(i));
    held.push_back(b->make_lock(name)->acquire());
    int where = -1, copies = 0;
    for (std::size_t s = 0; s < servers.size(); ++s)
      if (servers[s]->get(name)) {
        where = static_cast<int>(s);
        ++copies;
      }
    ASSERT_EQ(copies, 1) << name << " is on " << copies << " servers";
    ++per_server[static_cast<std::size_t>(where)];
    EXPECT_TRUE(fence_on(*servers[static_cast<std::size_t>(where)], name)) << "the fencing counter of " << name
                                                                           << " is not on its lock's server";
  }
  for (std::size_t s = 0; s < servers.size(); ++s)
    EXPECT_GT(per_server[s], 0) << "no name of 40 landed on server " << s + 1 << ": the names are not spread";
}

// No replication and no failover: a name whose server is down fails; it is not moved to another
// server (libmemcached's auto-eject would do that), where a second holder could take it while the
// first still holds it on the server that comes back.
TEST(memcached_ring, AServerDownFailsItsNamesInsteadOfMovingThem) {
  const auto ring = ring_uri();
  auto servers = one_client_per_server(ring);
  ASSERT_EQ(servers.size(), 2u);
  auto b = dlock::open(ring + "?ttl=10s&restart_delay=off");
  // A name on server 2 and one on server 1.
  std::string on_second, on_first;
  for (int i = 0; i < 100 && (on_second.empty() || on_first.empty()); ++i) {
    const auto name = unique_name("ring-down-" + std::to_string(i));
    auto l = b->make_lock(name)->acquire();
    (servers[1]->get(name) ? on_second : on_first) = name;
  }
  ASSERT_FALSE(on_second.empty());
  ASSERT_FALSE(on_first.empty());
  ASSERT_EQ(dlock::testing::run_launcher("stop memcached-ring.2"), 0);
  struct restart {
    ~restart() { EXPECT_EQ(dlock::testing::run_launcher("start memcached-ring.2"), 0); }
  } restart_at_exit;
  std::error_code ec;
  auto moved = b->make_lock(on_second)->try_acquire(ec);
  EXPECT_FALSE(moved) << "a name whose server is down was granted (moved to another server?)";
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << ec.message();
  EXPECT_FALSE(servers[0]->get(on_second)) << "the name's item appeared on the other server";
  ec.clear();
  auto still = b->make_lock(on_first)->try_acquire(ec);
  EXPECT_TRUE(still) << "a name on the live server failed: " << ec.message();
}
