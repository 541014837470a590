#pragma once
// Helpers shared by the Redis Cluster tests (redis_cluster_*_test.cpp, one executable), defined in
// redis_cluster_support.cpp. The cluster is the launcher's redis-cluster (three masters with a
// replica each, redis-cluster.1..6, cluster-node-timeout 1000). The code under test is used as a
// black box through the public API; raw hiredis only observes where keys are and faults the
// cluster (slot migrations, SIGKILLed masters). Every test starts from a healthy cluster and
// leaves it healthy whatever happens (restore_cluster, also run at SetUp). The tests FAIL when a
// variable is unset (compose/native/dlock-servers up redis redis-cluster).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "raw_redis.hpp"

namespace dlock::testing::redis_cluster {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

using raw_redis::reply_ptr;

std::string cluster_uri();
std::vector<int> cluster_ports();

// The launcher's process of a node's port: redis-cluster.1 .. .6, in the order of the ports.
std::string process_of(int port);

// A raw connection to one node (the test does not trust the code under test). Not redirected:
// a command for a slot the node does not serve comes back as the MOVED/ASK error itself.
class raw_node {
 public:
  explicit raw_node(int port);
  reply_ptr command(const std::vector<std::string>& args);

 private:
  raw_redis::context_ptr ctx_;
};

// One command on a short-lived raw connection.
reply_ptr ask(int port, const std::vector<std::string>& args);

bool is_error(const reply_ptr& r);
std::string text_of(const reply_ptr& r);
bool answers(int port);

// A field of CLUSTER INFO, or of INFO <section>; "" when absent.
std::string cluster_info(int port, const std::string& field);
std::string info(int port, const std::string& section, const std::string& field);

int keyslot(const std::string& key);

// Redisson's prefixName (and the client's): "<prefix>:{<name>}", or "<prefix>:<name>" when the
// name has a '{' of its own, so that a hash-tagged name's keys keep its tag.
std::string prefixed(const std::string& prefix, const std::string& name);

// The slot's master and its replicas as CLUSTER SLOTS on `port` names them.
struct slot_owner {
  int master = -1;
  std::string master_id;
  std::vector<int> replicas;
};
std::optional<slot_owner> owner_seen_by(int port, int slot);
// As the first node that answers sees it.
std::optional<slot_owner> owner_of(int slot);

// The masters that own slots, as CLUSTER SLOTS on the first node that answers names them.
std::vector<int> master_ports();
// The last of master_ports() other than `port` (where to move a slot of it), or -1.
int master_other_than(int port);

// The key is in the node's keyspace (GETKEYSINSLOT: no redirection, masters and replicas alike).
bool stored_on(int port, const std::string& key);
// The masters (of CLUSTER SLOTS) whose keyspace has the key.
std::vector<int> masters_storing(const std::string& key);
std::string type_on(int port, const std::string& key);

// The cluster as every node sees it, for failure messages.
std::string describe_cluster();

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds bound);

// Healthy (every node up, agreeing, no slot in migration, every replica synced), and every node
// older than a lock of `ttl`: the client grants nothing on a server younger than its ttl
// (wait_after_restart), and a replica that was restarted by an earlier test may be the master a
// failover promotes here.
std::function<bool()> ready_for(std::chrono::seconds ttl);

// A slot moved from one master to another as redis-cli --cluster reshard does, in steps, so that
// a test can act between them: open() (IMPORTING on the target, then MIGRATING on the source),
// move_keys() (MIGRATE in batches; some keys only, to leave the slot half moved), close()
// (SETSLOT NODE on the target, the source and every other master). Each returns "" or what failed.
class slot_move {
 public:
  slot_move(int slot, int from, int to);
  std::string open();
  // Every key of the slot on the source, or only `these` of them.
  std::string move_keys(const std::vector<std::string>& these = {});
  std::string close();

 private:
  int slot_, from_, to_;
  std::string from_id_, to_id_;
};

// Puts the cluster back together, whatever a test (or a crashed earlier run) left, then waits
// until it is healthy; an ADD_FAILURE when it cannot.
void restore_cluster();

// Restores the cluster when the scope ends, also after a failed ASSERT.
class cluster_restorer {
 public:
  cluster_restorer() = default;
  cluster_restorer(const cluster_restorer&) = delete;
  cluster_restorer& operator=(const cluster_restorer&) = delete;
  ~cluster_restorer() { restore_cluster(); }
};

// What the lock protects: a read-modify-write that loses updates when two holders overlap, an
// overlap detector, and the holders' fencing tokens in the order they came in.
struct guarded_resource {
  std::atomic<int> counter{0}, inside{0}, overlaps{0};
  std::mutex tokens_mutex;
  std::vector<std::uint64_t> tokens;
  int read_value = 0;  // the read half of an enter()/leave() pair

  void enter(const dlock::lease& held);
  void leave();
  // A whole turn: enter, hold a moment, leave (read and write in the same thread).
  void turn(const dlock::lease& held, std::chrono::milliseconds hold);
  // "" when the tokens strictly increase in the order the holders came in.
  std::string token_order();
};

// Waiters on one name, each with a backend of its own (its own connections and subscriptions):
// each, once granted, takes a turn on the resource and releases.
class waiters {
 public:
  waiters(int count, const std::string& uri, const std::string& name, std::chrono::seconds bound,
          guarded_resource& resource);
  ~waiters() { join(); }
  waiters(const waiters&) = delete;
  waiters& operator=(const waiters&) = delete;

  int waiting() const { return waiting_.load(); }
  void join();
  int granted() const { return granted_.load(); }
  int not_granted() const { return not_granted_.load(); }
  int failed() const { return failed_.load(); }

 private:
  std::atomic<int> waiting_{0}, granted_{0}, not_granted_{0}, failed_{0};
  std::vector<std::thread> threads_;
};

// The holder leaves the resource and releases (no error: not_owner would mean the lock was lost);
// then every waiter must have been granted once, in turn: no overlap, an exact count, tokens in
// order. `why`: what a waiter not granted means in this test.
void release_and_expect_every_waiter_served(dlock::lease& held, guarded_resource& resource, waiters& waiting,
                                            int waiter_count, const std::string& why);

// Until every waiter has made its first attempt and (best effort: the client may also poll) the
// slot's master counts a sharded subscriber per waiter on the lock's release channel.
void let_waiters_wait(const waiters& w, int count, int master, const std::string& channel);

std::shared_ptr<dlock::backend> open_cluster(const std::string& query = "");
std::string unique(std::string_view what);

// Every test starts from a healthy cluster whose nodes are older than a 15 s ttl.
class RedisCluster : public ::testing::Test {
 protected:
  void SetUp() override;
};

}  // namespace dlock::testing::redis_cluster
