#pragma once
// redis:// (SET NX PX, redis-py layout), redis+reentrant:// (Redisson RLock layout) and
// redis+fair:// (Redisson RFairLock layout).
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cluster.hpp"
#include "connection.hpp"
#include "dlock/spi.hpp"
#include "pipeline.hpp"
#include "replication.hpp"
#include "sentinel.hpp"
#include "subscriber.hpp"
#include "worker.hpp"

namespace dlock::redis {

enum class mode { simple, reentrant, fair };

struct settings {
  endpoint where;
  std::size_t pool_size = 16;
  std::string prefix;     // prepended to every key; empty = redis-py / Redisson layout
  std::string client_id;  // Redisson client UUID in owner fields
  mode lock_mode = mode::simple;
  std::chrono::milliseconds fair_wait{300000};  // Redisson's threadWaitTime (fairLockWaitTimeout)
  // antirez's delayed restart, on the client side: grant nothing while the server is younger than
  // the lock's ttl, so every holder from before a restart without persistence has passed its
  // validity deadline (and been told) before anyone else is granted. false only for servers that
  // persist every write (appendfsync always).
  bool wait_after_restart = true;
  replication replicas;  // min_replicas / replica_timeout (replication.hpp)
  // redis+...+sentinel://: where the master is comes from these sentinels (sentinel.hpp).
  std::optional<sentinel_settings> sentinel;
  // redis+...+cluster://: the nodes first asked for the slot map (cluster.hpp); empty otherwise.
  std::vector<endpoint> cluster_seeds;
  // Releases are published with SPUBLISH and waited for with SSUBSCRIBE on the slot's master
  // (sharded pub/sub: a cluster of Redis 7 or later, unless pubsub=classic). Set at open.
  bool sharded_pubsub = false;
  enum class pubsub_choice { automatic, sharded, classic } pubsub = pubsub_choice::automatic;
};

// The script as sent with these settings: with sharded pub/sub, its redis.call('publish', ...)
// calls are SPUBLISH (made once per script). The Redisson scripts that take the command as an
// argument get publish_command() instead.
const script& as_published(const settings& cfg, const script& s);
std::string_view publish_command(const settings& cfg) noexcept;

settings parse_settings(const uri& u, mode m);  // throws dlock::error(invalid_uri)

// What every lock and lease of one backend shares: the pool, the subscriber, the leases held and
// the background worker.
//
// Lifetimes: every lock and lease holds a shared_ptr to it, and everything that calls back into it
// (the subscriber's and the pool's listeners, the worker's tasks) holds a plain pointer: the
// subscriber's thread and the worker's thread are joined before the members they use go, and
// taking a shared_ptr there could make such a thread destroy, hence join, itself.
struct backend_state {
  backend_state() = default;
  ~backend_state();
  backend_state(const backend_state&) = delete;
  backend_state& operator=(const backend_state&) = delete;

  settings config;
  // The Sentinel schemes' view of the master, shared with the pool's opener (null otherwise).
  std::shared_ptr<sentinel_watch> sentinels;
  // redis:// and the Sentinel schemes: the one server (its pool, and the auto-pipeline over it that
  // carries the acquire, release and renewal scripts of every thread: pipeline.hpp). The Cluster
  // schemes: null, and `cluster` gives each key's node.
  std::shared_ptr<node> single;
  std::unique_ptr<cluster_map> cluster;
  // The watchdog's renewals of this backend's leases, pipelined (redis_backend.cpp).
  std::unique_ptr<spi::renewal_batch> renewals;
  // The same for the reader-writer locks' and semaphores' leases (redis_primitives.cpp).
  std::unique_ptr<spi::renewal_batch> primitive_renewals;

  // The node serving `key`: the one server, or the cluster master of its slot. nullptr + ec.
  std::shared_ptr<node> node_for(std::string_view key, std::error_code& ec) noexcept;
  // A pooled connection to the node of `key`, waited for until `deadline` (default: connect_timeout).
  pool::handle checkout_for(std::string_view key, std::error_code& ec) noexcept;
  pool::handle checkout_for(std::string_view key, std::chrono::steady_clock::time_point deadline,
                            std::error_code& ec) noexcept;
  // pipeline::eval on the node of keys[0]. On a cluster, a MOVED answer is followed (the slot map
  // read again) and an ASK answer sent once to its target after ASKING; TRYAGAIN (a multi-key
  // script while its slot is half migrated) is tried again until `deadline`. The caller never sees
  // those replies: past the deadline they fail as backend_unavailable.
  pipeline::outcome eval(const script& s, const std::vector<std::string_view>& keys,
                         const std::vector<std::string_view>& args, std::chrono::steady_clock::time_point deadline,
                         std::chrono::milliseconds min_server_age, std::error_code& ec, bool source_only = false,
                         const std::vector<std::string_view>& trailer = {}) noexcept;
  // backend_state::eval's part on a cluster, from the node of keys[0].
  pipeline::outcome eval_on_cluster(std::shared_ptr<node> n, const script& s, const std::vector<std::string_view>& keys,
                                    const std::vector<std::string_view>& args,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::chrono::milliseconds min_server_age, std::error_code& ec, bool source_only,
                                    const std::vector<std::string_view>& trailer) noexcept;
  // Started on the first wait or the first grant. Its connection is watched all the time, so a
  // server that goes away is noticed at once, not at the next renewal. On a cluster it is
  // connected to any node: Redis Cluster delivers a PUBLISH to the subscribers of every node.
  std::shared_ptr<subscriber> subscriber_for_waits() noexcept;
  // A lease on `key` was granted: its server is watched from now on (the subscriber's connection,
  // and on a cluster one to the key's master), so its death or restart is noticed at once.
  void watch_server_of(std::string_view key) noexcept;

  // The leases alive now, so they can be checked at once when the server may have lost them.
  // `owner` is the token (simple) or the owner field (Redisson layouts).
  std::uint64_t add_held(spi::lease_state* lease, std::string key, std::string owner) noexcept;
  void remove_held(std::uint64_t id) noexcept;
  // A lease of `owner` on `key` is alive in this process (a reentrant acquire of it is granted at
  // once, so it must not queue behind this process's waiters).
  bool holds(const std::string& key, const std::string& owner) noexcept;
  // The server may have restarted (a connection dropped or the run_id changed): check every held
  // lease in the background, retrying until the server answers, and mark lost the ones whose key
  // is gone, instead of waiting for their next renewal.
  void check_held_soon() noexcept;
  void post(worker::task t) noexcept { background_.post(std::move(t)); }
  // The sentinels announced a new master: the pooled connections and the subscriber's reconnect
  // to it, and the held leases are checked there.
  void master_moved() noexcept;
  // Says once per server run (report_background_error) why acquires answer "held" for now.
  void note_young_server(const std::string& run_id, std::chrono::milliseconds left,
                         std::chrono::milliseconds ttl) noexcept;

 private:
  void check_held(std::stop_token stop) noexcept;
  struct held {
    spi::lease_state* lease;
    std::string key, owner;
  };
  std::mutex held_mutex_;
  std::map<std::uint64_t, held> held_;
  std::map<std::string, std::size_t, std::less<>> holds_;  // key + '\0' + owner -> leases alive
  std::uint64_t next_held_id_ = 0;
  std::atomic<bool> check_pending_{false};
  std::string young_run_id_reported_;  // under held_mutex_
  worker background_;                  // its thread is joined before the members above go
  std::mutex mutex_;
  std::shared_ptr<subscriber> subscriber_;  // last: joined first (its listener posts to background_)
};

class redis_backend final : public backend {
 public:
  redis_backend(const uri& u, const lock_options& defaults, mode m);
  const std::shared_ptr<backend_state>& state() const noexcept { return state_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  // Redisson's RReadWriteLock and RPermitExpirableSemaphore layouts, the same on all three schemes.
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;

 private:
  std::shared_ptr<backend_state> state_;
};

// The server keys of one lock (key = prefix + name). simple: redis-py's layout at the key;
// reentrant and fair: Redisson's hash (only fair uses queue and timeout). The derived keys are
// Redisson's for every layout, hash-tagged by the key: the fencing counter is RFencedLock's
// redisson_lock_token:{key}, which the name's reader-writer lock counts with too (one sequence per
// name), and releases publish on redisson_lock__channel:{key} (fair: per waiter, the lock adds the
// owner) and on the reader-writer lock's channel rw_channel, whose waiters the mutex holds back.
// `waiting` is the reader-writer lock's waiting-writers set (a waiting mutex holds back readers),
// `permits` the semaphore's permit zset of the same name (what a conflict reports).
struct key_names {
  std::string key, fence, channel, queue, timeout, waiting, permits, rw_channel;
};
key_names keys_for(std::string_view prefix, mode m, std::string_view name);

// On a cluster, every key of one lock (or rw lock, or semaphore) must share a slot: throws
// dlock::error(invalid_name) naming the two slots and the hash-tag fix otherwise.
void require_one_slot(const backend_state& s, std::string_view name, std::initializer_list<std::string_view> keys);

// The name is in use as another kind of primitive: an acquire script answered {-3, permits held,
// what the name is} (scripts.hpp). Sets errc::name_conflict with a message saying what the name is
// in use as (the words "in use as a semaphore", "a mutex", "a reader-writer lock") and that
// `wanted` ("a mutex", "a reader-writer lock", "a semaphore") of the same name cannot be taken;
// `key` is the name's raw key (a semaphore's count key stays after its last permit is returned).
void set_name_conflict(std::error_code& ec, std::string_view name, std::string_view key, const redisReply& r,
                       std::string_view wanted);
// Whether an acquire script answered so.
bool is_name_conflict(const redisReply* r) noexcept;

// Redisson's "<client uuid>:<thread id>" owner field, with the lock object's owner in place of the
// thread (a 63-bit hash of it): identity per owner (lock object), never per calling thread.
std::string redisson_owner_field(const settings& cfg, std::string_view owner);

// Redisson's hash-tagged derived names: prefixName(p, n) = p + ":{" + n + "}" (braces omitted
// when n already contains '{').
std::string redisson_prefix_name(std::string_view prefix, std::string_view name);

}  // namespace dlock::redis
