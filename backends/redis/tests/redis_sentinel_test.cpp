// Redis Sentinel and min_replicas on real servers: the launcher's redis-sentinel set (a master, two
// replicas, three sentinels). The failover tests SIGSTOP and SIGKILL members of the set and leave
// it healthy again whatever happens (set_restorer). Run serially: every client of the set sees the
// faults. They FAIL when a variable is unset (compose/native/dlock-servers up redis redis-sentinel).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/frozen_process.hpp"
#include "dlock_test/support.hpp"
#include "raw_redis.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace raw_redis = dlock::testing::raw_redis;
using raw_redis::reply_ptr;

std::string sentinel_uri() { return dlock::testing::server_uri("DLOCK_REDIS_SENTINEL_URI"); }

std::vector<int> ports_of(const char* variable) {
  std::vector<int> out;
  std::stringstream in(dlock::testing::server_uri(variable));
  for (std::string p; std::getline(in, p, ',');) out.push_back(std::stoi(p));
  return out;
}
std::vector<int> data_ports() { return ports_of("DLOCK_REDIS_SENTINEL_DATA_PORTS"); }
std::vector<int> sentinel_ports() { return ports_of("DLOCK_REDIS_SENTINEL_PORTS"); }

// One command on a short-lived raw connection (the test does not trust the code under test).
reply_ptr ask(int port, const std::vector<std::string>& args) {
  return raw_redis::command(raw_redis::connect_local(port, 2s).get(), args);
}

// The master's port as the sentinels name it (the first that answers), or -1.
int master_port() {
  for (int s : sentinel_ports())
    if (auto r = ask(s, {"SENTINEL", "get-master-addr-by-name", "mymaster"});
        r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
      return std::stoi(r->element[1]->str);
  return -1;
}

std::string role_of(int port) {
  auto r = ask(port, {"ROLE"});
  return r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? std::string(r->element[0]->str) : std::string("down");
}

bool exists_on(int port, const std::string& key) {
  auto r = ask(port, {"EXISTS", key});
  return r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

// The launcher's process of a data port: redis-sentinel.1 .. .3.
std::string process_of(int port) {
  const auto ports = data_ports();
  for (std::size_t i = 0; i < ports.size(); ++i)
    if (ports[i] == port) return "redis-sentinel." + std::to_string(i + 1);
  return "?";
}

std::vector<int> replicas_of(int master) {
  std::vector<int> out;
  for (int p : data_ports())
    if (p != master) out.push_back(p);
  return out;
}

// A sentinel's view of the master set (SENTINEL MASTER: port, flags, num-slaves, num-other-sentinels,
// failover-state while it runs one, ...); empty when it does not answer.
std::map<std::string, std::string> sentinel_view(int sentinel) {
  std::map<std::string, std::string> out;
  auto r = ask(sentinel, {"SENTINEL", "MASTER", "mymaster"});
  if (r && r->type == REDIS_REPLY_ARRAY)
    for (std::size_t i = 0; i + 1 < r->elements; i += 2)
      if (r->element[i]->str && r->element[i + 1]->str) out[r->element[i]->str] = r->element[i + 1]->str;
  return out;
}

bool in_tilt(int sentinel) {
  return raw_redis::bulk_text(ask(sentinel, {"INFO", "sentinel"})).find("sentinel_tilt:1") != std::string::npos;
}

// The master a data node replicates from (ROLE), or -1 when it is not a replica or does not answer.
int following(int port) {
  auto r = ask(port, {"ROLE"});
  return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && std::string_view(r->element[0]->str) == "slave"
             ? static_cast<int>(r->element[2]->integer)
             : -1;
}

// The replicas a master lists (INFO replication), each as "port:state", e.g. "16391:online".
std::vector<std::string> replicas_listed_by(int master) {
  std::vector<std::string> out;
  std::istringstream in(raw_redis::bulk_text(ask(master, {"INFO", "replication"})));
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("slave") || line.find(":ip=") == std::string::npos) continue;
    const auto field = [&line](std::string_view key) {
      const auto at = line.find(key);
      if (at == std::string::npos) return std::string("?");
      const auto from = at + key.size();
      return line.substr(from, line.find(',', from) - from);
    };
    out.push_back(field(",port=") + ":" + field(",state="));
  }
  return out;
}

// The set is healthy: one master the sentinels agree on, ROLE master, two replicas linked to it,
// and every sentinel seeing two replicas and two other sentinels.
bool healthy() {
  const int m = master_port();
  if (m < 0 || role_of(m) != "master") return false;
  for (int s : sentinel_ports()) {
    auto v = sentinel_view(s);
    if (v["num-slaves"] != "2" || v["num-other-sentinels"] != "2" || v["port"] != std::to_string(m)) return false;
  }
  // Both replicas linked and done syncing (a replica still loading the master's data acks nothing).
  const auto replicas = replicas_listed_by(m);
  return std::ranges::count_if(replicas, [](const std::string& r) { return r.ends_with(":online"); }) == 2;
}

// What every member of the set says, for a failure message: each data node's process, role and the master it
// follows or the replicas it lists; each sentinel's master, flags, counts, failover state and TILT (a sentinel
// that saw its own clock jump, or was not scheduled for 2 s, acts on nothing for 30 s).
std::string describe_set() {
  std::ostringstream out;
  for (int p : data_ports()) {
    const auto proc = process_of(p);
    const auto pid = dlock::testing::launcher_pid(proc);
    out << "\n  " << proc << " (" << p << (pid > 0 ? ")" : ", not running)") << ": ";
    auto r = ask(p, {"ROLE"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
      out << "no answer";
    } else if (const std::string role = r->element[0]->str; role == "slave" && r->elements >= 4) {
      out << "replica of " << r->element[2]->integer << ", link " << r->element[3]->str;
    } else {
      out << role << ", replicas";
      for (const auto& replica : replicas_listed_by(p)) out << ' ' << replica;
    }
  }
  for (int s : sentinel_ports()) {
    auto v = sentinel_view(s);
    out << "\n  sentinel " << s << ": ";
    if (v.empty()) {
      out << "no answer";
      continue;
    }
    out << "master " << v["port"] << " (" << v["flags"] << "), " << v["num-slaves"] << " replicas, "
        << v["num-other-sentinels"] << " other sentinels";
    if (v.contains("failover-state")) out << ", failover " << v["failover-state"];
    if (in_tilt(s)) out << ", TILT";
  }
  return out.str();
}

// How long the master has been up (INFO server), or 0 when it does not answer.
std::chrono::seconds master_uptime() {
  const int m = master_port();
  auto info = m < 0 ? nullptr : ask(m, {"INFO", "server"});
  if (!info || info->type != REDIS_REPLY_STRING) return std::chrono::seconds(0);
  const std::string text(info->str, info->len);
  const auto at = text.find("uptime_in_seconds:");
  return at == std::string::npos ? std::chrono::seconds(0)
                                 : std::chrono::seconds(std::stol(text.substr(at + sizeof("uptime_in_seconds:") - 1)));
}

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds bound) {
  for (const auto until = clock_type::now() + bound; clock_type::now() < until; std::this_thread::sleep_for(100ms))
    if (done()) return true;
  return done();
}

// No sentinel runs a failover or sees the master objectively down (one is about to start).
bool no_failover_running() {
  for (int s : sentinel_ports())
    if (auto v = sentinel_view(s);
        v["flags"].find("failover_in_progress") != std::string::npos || v["flags"].find("o_down") != std::string::npos)
      return false;
  return true;
}

// The master the set is rebuilt around: the one most sentinels name, when it says ROLE master (a set that is
// only settling keeps its master), else the first data node that says ROLE master, else the first data node.
int intended_master() {
  std::map<int, int> named;
  for (int s : sentinel_ports())
    if (auto r = ask(s, {"SENTINEL", "get-master-addr-by-name", "mymaster"});
        r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
      ++named[std::stoi(r->element[1]->str)];
  int best = -1;
  for (const auto& [port, count] : named)
    if (role_of(port) == "master" && (best < 0 || count > named[best])) best = port;
  if (best > 0) return best;
  for (int p : data_ports())
    if (role_of(p) == "master") return p;
  return data_ports()[0];
}

// Puts the set back together from its known ports: every data node running and thawed, and every one but the
// intended master made its replica, also one still replicating from another node (a replica of a replica, or of
// an old master, is not listed by the master and never counts). With `remonitor`, every sentinel monitors that
// master afresh: SENTINEL REMOVE before the data nodes move (no sentinel acts on the set meanwhile), MONITOR
// after, so each forgets the master, replicas and failover it may be stuck on, and learns the replicas from
// the master's INFO and the other sentinels from their hello messages. Sentinels never repair a set whose
// replicas follow another node than the master they monitor: they learn replicas from that master's INFO
// only, and see no reason to fail over a master that answers.
void rebuild_set(bool remonitor) {
  for (int p : data_ports())
    if (auto pid = dlock::testing::launcher_pid(process_of(p)); pid > 0) ::kill(pid, SIGCONT);
  // A failover the sentinels run (the test's, or one a loaded machine's missed pings started) is let finish,
  // not raced: its new master is then the one kept (failover-timeout is 3 s; the bound is a hang guard).
  wait_for(no_failover_running, 15s);
  for (int p : data_ports())
    if (dlock::testing::launcher_pid(process_of(p)) <= 0) dlock::testing::run_launcher("start " + process_of(p));
  const int m = intended_master();
  if (remonitor)
    for (int s : sentinel_ports()) ask(s, {"SENTINEL", "REMOVE", "mymaster"});
  for (int p : data_ports())
    if (p != m && following(p) != m) ask(p, {"REPLICAOF", "127.0.0.1", std::to_string(m)});
  if (remonitor)
    for (int s : sentinel_ports()) {
      ask(s, {"SENTINEL", "MONITOR", "mymaster", "127.0.0.1", std::to_string(m), "2"});
      ask(s, {"SENTINEL", "SET", "mymaster", "down-after-milliseconds", "1000", "failover-timeout", "3000",
              "parallel-syncs", "2"});
    }
}

// Rebuilds the set until it is healthy: the data nodes alone first (enough once the sentinels agree), then the
// sentinels too, twice at most. False when it is still not healthy.
bool restore_set() {
  rebuild_set(false);
  if (wait_for(healthy, 20s)) return true;
  for (int attempt = 0; attempt < 2; ++attempt) {
    rebuild_set(true);
    if (wait_for(healthy, 40s)) return true;
  }
  return false;
}

// Waits until the set is ready for a test whose locks have `ttl`: healthy, and a master old enough to grant
// such a lock. A younger one grants nothing for now (wait_after_restart), and the tests run one after another,
// each restarting a process of the set, so the master one test finds may be one an earlier test restarted
// moments ago. A set an earlier test left broken (its restorer failed, or it was killed before the restorer
// ran) is rebuilt first, so that one test's failure is not every later test's.
::testing::AssertionResult ready_for(std::chrono::seconds ttl) {
  const auto ready = [ttl] { return healthy() && master_uptime() > ttl + std::chrono::seconds(2); };
  if ((wait_for(healthy, 20s) || restore_set()) && wait_for(ready, 90s)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "master up " << master_uptime().count() << " s;" << describe_set();
}
constexpr const char* not_ready =
    "the Sentinel set is not healthy (or its master is younger than the ttl) before the test";

// Leaves the set healthy when the scope ends, whatever the test did: frozen members thawed, stopped ones
// started again, and the set rebuilt around its master until it is healthy (restore_set).
class set_restorer {
 public:
  ~set_restorer() {
    if (!restore_set()) ADD_FAILURE() << "the Sentinel set is not healthy again after the test:" << describe_set();
  }
};

// Closes the master's replication links. A frozen (SIGSTOPped) replica's kernel still receives the
// replication stream into its socket buffer and applies it on SIGCONT: freezing alone does not
// keep a write from a replica. With its link closed, nothing reaches it until it reconnects, which
// a frozen replica cannot do (a network partition between master and replica).
void cut_replication(int master) { ask(master, {"CLIENT", "KILL", "TYPE", "replica"}); }

std::shared_ptr<dlock::backend> open_uri(const std::string& text) { return dlock::default_registry().open(text); }
std::string unique(std::string_view what) { return dlock::testing::unique_name("dlock-sentinel:" + std::string(what)); }

// Waits until the sentinels name another master than `old` and it says ROLE master.
int wait_for_failover(int old, std::chrono::seconds bound = 40s) {
  int now = -1;
  wait_for(
      [&] {
        now = master_port();
        return now > 0 && now != old && role_of(now) == "master";
      },
      bound);
  return now != old ? now : -1;
}

TEST(RedisSentinel, AUnreplicatedGrantIsGivenAgainAfterAFailoverAndTheTokenStillIncreases) {
  ASSERT_TRUE(ready_for(20s)) << not_ready;
  set_restorer restore;
  const int old_master = master_port();
  const auto name = unique("double-grant");
  constexpr auto ttl = 20s;
  auto one = open_uri(sentinel_uri() + "?ttl=20s");
  auto two = open_uri(sentinel_uri() + "?ttl=20s");  // connected now: once the master is killed, opening would fail
  std::optional<dlock::testing::frozen_process> r1, r2;
  r1.emplace(process_of(replicas_of(old_master)[0]));
  r2.emplace(process_of(replicas_of(old_master)[1]));
  ASSERT_TRUE(r1->frozen() && r2->frozen());
  cut_replication(old_master);
  auto first = one->make_lock(name)->try_acquire();
  const auto granted_at = clock_type::now();
  ASSERT_TRUE(first) << "client 1 is granted while the replicas are frozen (nothing waits for them)";
  const auto token1 = *first.fencing_token();
  ASSERT_EQ(dlock::testing::run_launcher("stop --kill " + process_of(old_master)), 0);
  r1->thaw();
  r2->thaw();
  auto second = two->make_lock(name)->try_acquire_for(40s);
  const auto second_at = clock_type::now();
  ASSERT_TRUE(second) << "client 2 was never granted after the failover";
  // Every sentinel names the new master soon, but not at once (the election's leader says
  // +switch-master seconds after the others said +promoted-slave, which the client followed).
  const int new_master = wait_for_failover(old_master);
  EXPECT_GT(new_master, 0) << "the sentinels never named a new master";
  // The double grant: client 1's grant had not expired (its ttl runs from before its request)
  // when client 2 was granted the same name on the promoted replica.
  EXPECT_LT(second_at, granted_at + ttl) << "client 2 came after client 1's ttl: no double grant shown";
  std::printf(
      "[ measured ] failover: client 2 granted %lld ms after client 1 (ttl %lld ms); client 1 told lost "
      "before that: %s\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(second_at - granted_at).count()),
      static_cast<long long>(std::chrono::milliseconds(ttl).count()),
      first.lost_token().stop_requested() ? "yes" : "no");
  // The counter was lost with the grant, but it is raised to the server clock: a fenced resource
  // still refuses client 1.
  const auto token2 = *second.fencing_token();
  std::printf("[ measured ] tokens: client 1 %llu, client 2 %llu\n", static_cast<unsigned long long>(token1),
              static_cast<unsigned long long>(token2));
  EXPECT_GT(token2, token1) << "the fencing token went backwards across the failover";
  // Client 1 is told: its lease's check on the new master finds the key gone.
  EXPECT_TRUE(dlock::testing::fires_within(first.lost_token(), ttl)) << "client 1 was never told its lock is gone";
}

TEST(RedisSentinel, WithMinReplicasTheGrantSurvivesTheFailover) {
  ASSERT_TRUE(ready_for(20s)) << not_ready;
  set_restorer restore;
  const int old_master = master_port();
  const auto name = unique("replicated");
  const auto query = "?ttl=20s&min_replicas=1&replica_timeout=500ms";
  auto one = open_uri(sentinel_uri() + query);
  auto two = open_uri(sentinel_uri() + query);
  // One replica frozen: WAIT 1 is confirmed by the other alone, which must then be promoted (its
  // replication offset is ahead) and must have the grant.
  const int behind = replicas_of(old_master)[1];
  std::optional<dlock::testing::frozen_process> lagging;
  lagging.emplace(process_of(behind));
  ASSERT_TRUE(lagging->frozen());
  cut_replication(old_master);  // the other replica reconnects at once; the frozen one cannot
  // Waited for: WAIT is confirmed once the live replica has reconnected (within about a second).
  auto first = one->make_lock(name)->try_acquire_for(10s);
  ASSERT_TRUE(first) << "granted with one replica confirming";
  ASSERT_EQ(dlock::testing::run_launcher("stop --kill " + process_of(old_master)), 0);
  lagging->thaw();
  const int new_master = wait_for_failover(old_master);
  ASSERT_GT(new_master, 0) << "no replica was promoted";
  EXPECT_NE(new_master, behind) << "the replica that was frozen during the grant was promoted";
  EXPECT_TRUE(exists_on(new_master, name)) << "the promoted replica does not have the replicated grant";
  // Client 2 is refused while client 1's ttl runs (waited for 3 s: its attempts ride out the switch).
  EXPECT_FALSE(two->make_lock(name)->try_acquire_for(3s)) << "client 2 was granted a lock client 1 holds";
  EXPECT_FALSE(first.lost_token().stop_requested()) << "client 1 was told lost although its grant survived";
  std::error_code ec;
  first.release(ec);
  EXPECT_FALSE(ec) << ec.message();
}

TEST(RedisSentinel, AManualFailoverIsFollowedAndNoCommandGoesToTheOldMaster) {
  ASSERT_TRUE(ready_for(5s)) << not_ready;
  set_restorer restore;
  const int old_master = master_port();
  auto backend = open_uri(sentinel_uri() + "?ttl=5s");
  {
    auto warm = backend->make_lock(unique("warm"))->try_acquire();  // pooled connections to the old master
    ASSERT_TRUE(warm);
  }
  // A failover the sentinels abort (a replica not ready in their eyes yet, under load) is asked
  // for again; the test is about what the client does once there is one.
  int new_master = -1;
  for (int request = 0; request < 3 && new_master <= 0; ++request) {
    auto r = ask(sentinel_ports()[0], {"SENTINEL", "FAILOVER", "mymaster"});
    ASSERT_TRUE(r) << "no reply to SENTINEL FAILOVER";
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str).starts_with("INPROG")) {
      new_master = wait_for_failover(old_master, 15s);
      continue;
    }
    ASSERT_NE(r->type, REDIS_REPLY_ERROR) << r->str;
    new_master = wait_for_failover(old_master, 15s);
  }
  ASSERT_GT(new_master, 0) << "no failover in three requests of 15 s each";
  // The old master stays up, and stays a master until the sentinels reconfigure it (seconds):
  // a client that did not follow would go on writing there. This one follows within a second of
  // the sentinels naming the new master, and from then on every grant is on it.
  const auto named_at = clock_type::now();
  bool followed = false;
  while (!followed && clock_type::now() < named_at + 1s) {
    const auto name = unique("switching");
    auto lease = backend->make_lock(name)->try_acquire_for(10s);
    ASSERT_TRUE(lease);
    followed = exists_on(new_master, name);
  }
  std::printf("[ measured ] grants on the new master %lld ms after the sentinels named it\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - named_at).count()));
  ASSERT_TRUE(followed) << "the client did not follow the switch within a second";
  for (int i = 0; i < 20; ++i) {
    const auto name = unique("after-switch");
    auto lease = backend->make_lock(name)->try_acquire_for(10s);
    ASSERT_TRUE(lease) << "attempt " << i;
    std::string where;
    for (int p : data_ports()) where += std::to_string(p) + (exists_on(p, name) ? ":yes(" : ":no(") + role_of(p) + ") ";
    EXPECT_TRUE(exists_on(new_master, name))
        << "attempt " << i << ": the grant is not on the new master " << new_master << ": " << where;
  }
}

TEST(RedisMinReplicas, PlainRedisRefusesAGrantFewerReplicasConfirmedAndReleasesIt) {
  ASSERT_TRUE(ready_for(10s)) << not_ready;
  set_restorer restore;
  const int m = master_port();
  const auto uri = "redis://127.0.0.1:" + std::to_string(m) + "?ttl=10s&min_replicas=2&replica_timeout=200ms";
  auto backend = open_uri(uri);
  {
    // Waited for: a replica the previous test's failover reconfigured may still be resyncing.
    auto lease = backend->make_lock(unique("both-up"))->try_acquire_for(10s);
    EXPECT_TRUE(lease) << "two replicas up: granted";
  }
  const auto name = unique("one-down");
  {
    dlock::testing::frozen_process one(process_of(replicas_of(m)[0]));
    ASSERT_TRUE(one.frozen());
    try {
      (void)backend->make_lock(name)->try_acquire();
      ADD_FAILURE() << "granted with one of two replicas frozen";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::backend_unavailable));
      const std::string what = e.what();
      EXPECT_NE(what.find("only 1 of the 2 replicas"), std::string::npos) << what;
      EXPECT_NE(what.find("released"), std::string::npos) << what;
    }
    EXPECT_FALSE(exists_on(m, name)) << "the grant that did not count was left on the server";
    // A waiting form keeps trying until its deadline, then reports the outage.
    const auto start = clock_type::now();
    EXPECT_THROW((void)backend->make_lock(name)->try_acquire_for(1s), dlock::error);
    EXPECT_GE(clock_type::now() - start, 1s);
  }
  EXPECT_TRUE(backend->make_lock(name)->try_acquire_for(5s)) << "the replica is back: granted";
}

TEST(RedisSentinel, BadInputIsRefusedClearly) {
  const auto sentinels = sentinel_uri().substr(0, sentinel_uri().rfind('/'));
  const auto code_of = [](const std::string& uri, std::string& what) {
    try {
      (void)open_uri(uri);
    } catch (const dlock::error& e) {
      what = e.what();
      return e.code();
    }
    return std::error_code();
  };
  std::string what;
  EXPECT_EQ(code_of(sentinels + "/no-such-set", what), make_error_code(dlock::errc::backend_error));
  EXPECT_NE(what.find("'no-such-set'"), std::string::npos) << what;
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(sentinel_ports()[0])), std::string::npos) << what;

  EXPECT_EQ(code_of("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster?connect_timeout=300ms", what),
            make_error_code(dlock::errc::backend_unavailable));
  EXPECT_NE(what.find("127.0.0.1:1"), std::string::npos) << what;
  EXPECT_NE(what.find("127.0.0.1:2"), std::string::npos) << what;

  const auto plain = "redis+sentinel://127.0.0.1:" + dlock::testing::server_uri("DLOCK_REDIS_PORT") + "/mymaster";
  EXPECT_EQ(code_of(plain, what), make_error_code(dlock::errc::backend_error));
  EXPECT_NE(what.find("not a Redis Sentinel"), std::string::npos) << what;

  EXPECT_EQ(code_of(sentinels + "/mymaster?sentinel_user=x", what), make_error_code(dlock::errc::invalid_uri));
  EXPECT_NE(what.find("sentinel_password"), std::string::npos) << what;
  EXPECT_EQ(code_of(sentinels + "/", what), make_error_code(dlock::errc::invalid_uri));
  EXPECT_EQ(code_of(sentinels + "/mymaster?min_replicas=1&replica_timeout=5s", what),
            make_error_code(dlock::errc::invalid_uri));

  // Credentials never in a message: the sentinels have no password, so AUTH is refused.
  const auto with_secrets = "redis+sentinel://u:pw-SECRET-1@" + sentinels.substr(sentinels.find("://") + 3) +
                            "/mymaster?sentinel_password=pw-SECRET-2";
  EXPECT_EQ(code_of(with_secrets, what), make_error_code(dlock::errc::authentication_failed));
  EXPECT_EQ(what.find("SECRET"), std::string::npos) << what;
  EXPECT_NE(what.find("sentinel_password"), std::string::npos) << what;
}

}  // namespace
