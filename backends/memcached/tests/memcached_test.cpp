// memcached:// against a real server (DLOCK_MEMCACHED_URI, e.g. from compose/native/dlock-servers).
// Each test reads the server directly with raw libmemcached, so it does not trust the code under test.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_pool.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/batch_renewal.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"

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
  explicit raw_client(const std::string& text) : u(dlock::uri::parse(text)), m(mc::make_handle(u, 2s, 2s)) {}
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
  const std::set<std::string> keys{mc::keys_for("dlock:", "a b").lock,  mc::keys_for("dlock:", "a_b").lock,
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
  const auto granted_after =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted);
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
    EXPECT_TRUE(fence_on(*servers[static_cast<std::size_t>(where)], name))
        << "the fencing counter of " << name << " is not on its lock's server";
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

// --- round trips and batched renewal, counted by a private server's `stats` ---

namespace {

// A memcached of this test alone (its counters see no other client), on a free port; killed at
// scope exit. Skips the test when no memcached binary is on PATH.
class private_server {
 public:
  private_server() {
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (probe < 0 || ::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (probe >= 0) ::close(probe);
      return;
    }
    port_ = ntohs(addr.sin_port);
    ::close(probe);
    const auto port = std::to_string(port_);
    std::vector<std::string> args{"memcached", "-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64", "-t", "2"};
    if (::geteuid() == 0) args.insert(args.end(), {"-u", "root"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawnp(&pid_, "memcached", nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 100 && pid_ > 0 && !answers(); ++i) std::this_thread::sleep_for(20ms);
  }
  ~private_server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  private_server(const private_server&) = delete;
  private_server& operator=(const private_server&) = delete;

  bool running() const { return pid_ > 0 && answers(); }
  std::string uri() const { return "memcached://127.0.0.1:" + std::to_string(port_); }

  // The server's cumulative command counters (`stats`).
  std::map<std::string, std::uint64_t> counters() const {
    raw_client c(uri());
    std::map<std::string, std::uint64_t> out;
    const auto rc = memcached_stat_execute(
        c.m.get(), nullptr,
        [](const memcached_instance_st*, const char* key, size_t key_length, const char* value, size_t value_length,
           void* context) {
          auto& m = *static_cast<std::map<std::string, std::uint64_t>*>(context);
          const std::string v(value, value_length);
          if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
            m[std::string(key, key_length)] = std::stoull(v);
          return MEMCACHED_SUCCESS;
        },
        &out);
    EXPECT_EQ(rc, MEMCACHED_SUCCESS);
    return out;
  }

 private:
  bool answers() const {
    try {
      raw_client c(uri());
      return memcached_version(c.m.get()) == MEMCACHED_SUCCESS;
    } catch (const std::exception&) {
      return false;
    }
  }
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

using counters = std::map<std::string, std::uint64_t>;
std::uint64_t delta(const counters& before, const counters& after, const std::string& key) {
  const auto b = before.find(key), a = after.find(key);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

// A waiting acquire (the mutex's, the semaphore's) ends by its deadline + 2 s whatever the server
// does, on the real server through a tcp_proxy: it accepts connections and never answers (the
// handle connects inside the acquire), it stops answering on its connections, it refuses. Before,
// connect_timeout and command_timeout (2 s each) were paid on top of the deadline, several times
// in an attempt of several commands. The bound is a correctness bound, never a speed claim.
TEST(memcached, WaitingAcquiresEndByTheirDeadlineWhateverTheServerDoes) {
  constexpr auto wait = 1000ms, slack = 2000ms;
  const auto target = dlock::uri::parse(server_uri());
  const auto host = target.hosts().front().host;
  const auto port = target.hosts().front().port_or(11211);
  const auto check = [&](const char* fault, const std::shared_ptr<dlock::backend>& b, auto heal) {
    const auto name = unique_name("deadline");
    auto lock = b->make_lock(name);
    auto sem = b->make_semaphore(name + "-sem", 2);
    std::future<std::pair<std::chrono::milliseconds, std::error_code>> runs[2];
    for (int form = 0; form < 2; ++form)
      runs[form] = std::async(std::launch::async, [&, form] {
        std::error_code ec;
        const auto start = std::chrono::steady_clock::now();
        auto l = form == 0 ? lock->try_acquire_for(wait, ec) : sem->try_acquire_for(wait, ec);
        if (l) ec = make_error_code(dlock::errc::invalid_argument);  // granted through a silent link: wrong
        return std::make_pair(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start), ec);
      });
    for (int form = 0; form < 2; ++form) {
      const char* what = form == 0 ? "mutex" : "semaphore";
      if (runs[form].wait_for(30s) != std::future_status::ready) {
        ADD_FAILURE() << fault << ": the " << what << " acquire still ran after 30 s";
        continue;
      }
      const auto [took, ec] = runs[form].get();
      EXPECT_LE(took, wait + slack) << fault << ": the " << what << " acquire took " << took.count() << " ms";
      EXPECT_EQ(ec, dlock::errc::backend_unavailable) << fault << ": " << what << ": " << ec.message();
    }
    heal();
    for (auto& r : runs)
      if (r.valid()) r.wait();
  };
  // Timeouts longer than the deadline: the deadline bounds the acquire, not them.
  const std::string query = "?ttl=5s&restart_delay=off&connect_timeout=5s&command_timeout=5s";
  {
    dlock::testing::tcp_proxy proxy(host, port);
    auto b = dlock::open("memcached://" + proxy.address() + query);
    proxy.partition();
    proxy.reset_connections();
    check("a server that accepts and never answers", b, [&] { proxy.heal(); });
  }
  {
    dlock::testing::tcp_proxy proxy(host, port);
    auto b = dlock::open("memcached://" + proxy.address() + query);
    ASSERT_TRUE(b->make_lock(unique_name("warm"))->try_acquire());  // a connection in the pool
    proxy.partition();
    check("a server that stops answering", b, [&] { proxy.heal(); });
  }
  {
    std::optional<dlock::testing::tcp_proxy> proxy(std::in_place, host, port);
    auto b = dlock::open("memcached://" + proxy->address() + query);
    proxy.reset();
    check("a server that refuses connections", b, [] {});
  }
}

}  // namespace

// An uncontended cycle is `add`, one `gets` of the lock item and the fencing base, and one `cas`
// (release) : no `incr` of a fencing counter and no `gets` before the release, whose CAS unique
// came with the grant. It used to be add, incr, gets, cas: four round trips.
TEST(memcached, AnUncontendedCycleIsAddOneGetsAndACas) {
  private_server server;
  // A missing server fails, as every backend test does: its counters must be this test's alone.
  ASSERT_TRUE(server.running()) << "could not start a private memcached on loopback (is the memcached package "
                                   "installed? compose/native/dlock-servers install memcached)";
  auto b = dlock::open(server.uri() + "?ttl=5s&watchdog=false&restart_delay=off");
  auto lock = b->make_lock(unique_name("cycle"));
  ASSERT_TRUE(lock->try_acquire());  // the name's first grant creates its fencing base
  constexpr std::uint64_t cycles = 20;
  const auto before = server.counters();
  std::uint64_t last = 0;
  for (std::uint64_t i = 0; i < cycles; ++i) {
    auto l = lock->try_acquire();
    ASSERT_TRUE(l);
    EXPECT_GT(*l.fencing_token(), last);
    last = *l.fencing_token();
    std::error_code ec;
    l.release(ec);
    ASSERT_FALSE(ec) << ec.message();
  }
  const auto after = server.counters();
  EXPECT_EQ(delta(before, after, "cmd_set"), 2 * cycles) << "stores per cycle: add and the release's cas";
  EXPECT_EQ(delta(before, after, "cas_hits"), cycles);
  EXPECT_EQ(delta(before, after, "cmd_get"), 3 * cycles)
      << "keys read per cycle: the lock item, the base and the name's semaphore record, in one gets";
  EXPECT_EQ(delta(before, after, "get_hits"), 2 * cycles) << "the semaphore record is absent: no semaphore of the name";
  EXPECT_EQ(delta(before, after, "incr_hits") + delta(before, after, "incr_misses"), 0u) << "an incr per cycle";
  EXPECT_EQ(delta(before, after, "cmd_touch"), 0u);
  EXPECT_EQ(delta(before, after, "delete_hits") + delta(before, after, "delete_misses"), 0u);
  EXPECT_FALSE(raw_client(server.uri()).get(lock->name())) << "the release left the item";
}

// The watchdog renews the leases that fall due together with one memcached_renewals call: per
// server, one `gets` of every key, a `cas ... noreply` per item still ours, one `gets` to see which
// stores were applied. A deleted item is reported lost as its single renewal would; the others
// stay valid and release cleanly, also while their batch is in flight.
TEST(memcached, WatchdogRenewsLeasesDueTogetherInOneBatch) {
  private_server server;
  // A missing server fails, as every backend test does: its counters must be this test's alone.
  ASSERT_TRUE(server.running()) << "could not start a private memcached on loopback (is the memcached package "
                                   "installed? compose/native/dlock-servers install memcached)";
  auto b = dlock::open(server.uri() + "?ttl=1500ms&restart_delay=off");
  raw_client raw(server.uri());
  counters stats_before, stats_after;
  ASSERT_NO_FATAL_FAILURE(dlock::testing::expect_batched_renewal(
      *b,
      {.remove =
           [&](const std::string& name) {
             const auto k = mc::keys_for("dlock:", name);
             ASSERT_EQ(
                 memcached_delete_by_key(raw.m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0),
                 MEMCACHED_SUCCESS);
           },
       .before_renewals = [&] { stats_before = server.counters(); },
       .after_renewals = [&] { stats_after = server.counters(); },
       .check_renewed =
           [&](const std::string& name, bool removed) {
             if (removed) {
               EXPECT_FALSE(raw.get(name)) << "a renewal re-created the deleted item";
             }
           },
       .check_released =
           [&](const std::string& name) { EXPECT_FALSE(raw.get(name)) << name << ": the release left the item"; }}));
  // Every renewal of a lease still ours is a cas that hit (with the CAS unique the lease kept);
  // only the deleted item's one renewal missed, and no store met an item it did not expect.
  constexpr std::uint64_t kept = dlock::testing::batch_renewal_leases - 1;
  EXPECT_GE(delta(stats_before, stats_after, "cas_hits"), 3u * kept);
  EXPECT_EQ(delta(stats_before, stats_after, "cas_badval"), 0u);
  EXPECT_EQ(delta(stats_before, stats_after, "cas_misses"), 1u);
  // One gets of the kept keys per batch, none before the stores.
  EXPECT_LE(delta(stats_before, stats_after, "cmd_get"), delta(stats_before, stats_after, "cas_hits") + 1);
}

// One renew_all call gives each lease the outcome its own renewal gives: ours renewed (a new CAS
// unique, the same token, validity moved), replaced by another owner or deleted: not_owner and
// lost, the other owner's item untouched and the deleted one not re-created.
TEST(memcached, ABatchRenewalGivesEachLeaseItsOwnOutcome) {
  auto b = open_backend("ttl=5s&watchdog=false&restart_delay=off");
  raw_client raw(server_uri());
  std::vector<std::string> names;
  std::vector<dlock::lease> leases;
  for (int i = 0; i < 6; ++i) {
    names.push_back(unique_name("outcome"));
    leases.push_back(b->make_lock(names.back())->try_acquire());
    ASSERT_TRUE(leases.back());
  }
  raw.set(names[1], "someone-else");
  raw.set(names[4], "someone-else");
  const auto k = mc::keys_for("dlock:", names[2]);
  ASSERT_EQ(memcached_delete_by_key(raw.m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0),
            MEMCACHED_SUCCESS);
  const auto cas_before = raw.get(names[0])->cas;
  const auto valid_before = leases[0].valid_until();
  std::this_thread::sleep_for(20ms);
  std::vector<dlock::spi::lease_state*> states;
  for (auto& l : leases) states.push_back(l.state().get());
  auto* batch = states[0]->batch();
  ASSERT_NE(batch, nullptr);
  std::vector<std::error_code> outcomes(states.size());
  EXPECT_EQ(dlock::spi::lease_state::renew_together(*batch, states, outcomes), states.size());
  for (const int ours : {0, 3, 5}) {
    EXPECT_FALSE(outcomes[ours]) << names[ours] << ": " << outcomes[ours].message();
    EXPECT_FALSE(leases[ours].lost_token().stop_requested());
    const auto now = raw.get(names[ours]);
    ASSERT_TRUE(now);
    EXPECT_NE(now->value, "someone-else");
  }
  EXPECT_NE(raw.get(names[0])->cas, cas_before) << "no store was applied to the lease's item";
  EXPECT_GT(leases[0].valid_until(), valid_before);
  for (const int gone : {1, 2, 4}) {
    EXPECT_EQ(outcomes[gone], dlock::errc::not_owner) << names[gone] << ": " << outcomes[gone].message();
    EXPECT_TRUE(leases[gone].lost_token().stop_requested()) << names[gone];
  }
  EXPECT_EQ(raw.get(names[1])->value, "someone-else");
  EXPECT_EQ(raw.get(names[4])->value, "someone-else");
  EXPECT_FALSE(raw.get(names[2])) << "the batch re-created a deleted item";
  // Renewed alone, a lease no longer knows its item's CAS unique: the next batch reads it first.
  std::error_code ec;
  leases[0].renew(5s, ec);
  EXPECT_FALSE(ec) << ec.message();
  const auto cas_alone = raw.get(names[0])->cas;
  std::vector<dlock::spi::lease_state*> ours{states[0], states[3]};
  std::vector<std::error_code> again(ours.size());
  EXPECT_EQ(dlock::spi::lease_state::renew_together(*batch, ours, again), ours.size());
  EXPECT_FALSE(again[0]) << again[0].message();
  EXPECT_FALSE(again[1]) << again[1].message();
  EXPECT_NE(raw.get(names[0])->cas, cas_alone) << "the batch did not store the item renewed alone before";
  // A release after renewals (the CAS unique changed each time) still deletes exactly our item.
  leases[0].release(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(raw.get(names[0]));
  leases[3].release(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(raw.get(names[3]));
}

TEST(MemcachedInspection, InspectNamesTheGrantsTokenAndForceReleaseDeletesIt) {
  auto b = open_backend("ttl=30s&restart_delay=off&watchdog=false");
  const auto name = unique_name("inspect");
  EXPECT_FALSE(b->inspect(name).held);
  auto stuck = b->make_lock(name);
  auto held = stuck->try_acquire();
  ASSERT_TRUE(held);
  raw_client raw(server_uri());
  const auto stored = raw.get(name);
  ASSERT_TRUE(stored);

  const auto info = b->inspect(name);
  ASSERT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, stored->value) << "memcached:// stores the grant's token, not the owner id";
  EXPECT_EQ(info.holders[0].fencing_token, held.fencing_token());
  EXPECT_FALSE(info.waiters_known);
  std::error_code ec;
  (void)b->list("", ec);
  EXPECT_EQ(ec, dlock::errc::not_supported) << "memcached cannot enumerate its keys";

  const auto removed = b->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, stored->value);
  EXPECT_FALSE(raw.get(name)) << "the item is gone";
  EXPECT_TRUE(b->make_lock(name)->try_acquire());
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  EXPECT_TRUE(b->force_release(unique_name("never-held")).empty());
}
