#pragma once
// The state of one redis://, redis+reentrant:// or redis+fair:// backend (one server, a Sentinel
// set's master, or a cluster) that its locks and leases share: the connections, the subscriber,
// the leases held and the background work.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "background_thread.hpp"
#include "cluster.hpp"
#include "connection.hpp"
#include "dlock/spi.hpp"
#include "pipeline.hpp"
#include "redis_settings.hpp"
#include "sentinel.hpp"
#include "subscriber.hpp"

namespace dlock::redis {

// What every lock and lease of one backend shares: the pool, the subscriber, the leases held and
// the background thread.
//
// Lifetimes: every lock and lease holds a shared_ptr to it, and everything that calls back into it
// (the subscriber's and the pool's listeners, the background thread's tasks) holds a plain pointer: the
// subscriber's thread and the background thread are joined before the members they use go, and
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
  // The watchdog's renewals of this backend's mutex leases (redis_lease.hpp), pipelined.
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
  void post(background_thread::task t) noexcept { background_.post(std::move(t)); }
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
  background_thread background_;       // its thread is joined before the members above go
  std::mutex mutex_;
  std::shared_ptr<subscriber> subscriber_;  // last: joined first (its listener posts to background_)
};

// On a cluster, every key of one lock (or rw lock, or semaphore) must share a slot: throws
// dlock::error(invalid_name) naming the two slots and the hash-tag fix otherwise.
void require_one_slot(const backend_state& s, std::string_view name, std::initializer_list<std::string_view> keys);

// What messages name: the server, or the Sentinel master set and its sentinels, or the cluster.
std::string server_label(const backend_state& s);

// A request the pipeline withdrew: its caller's deadline passed while every connection was busy.
// `doing` says what it was ("renewing lock 'x'").
void set_withdrawn_error(std::error_code& ec, const backend_state& s, std::string_view doing);

}  // namespace dlock::redis
