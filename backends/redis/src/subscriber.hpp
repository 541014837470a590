#pragma once
// The one pub/sub connection of a backend, shared by every waiting lock (thousands of waiters,
// one connection). A dedicated thread owns the hiredis context and poll()s its socket together
// with a wake-up pipe, so other threads can add or drop subscriptions without touching hiredis.
//
// One release message wakes ONE waiter of this process (the oldest), not all of them: the others
// would only run the acquire script to find the lock taken again (the stampede that made a cycle
// cost one script per waiter). A message that arrives while no waiter is parked is kept as a
// wake-up for the next one to park, so none is lost; a waiter that leaves on an error passes its
// wake-up on. After a dropped connection the thread reconnects, subscribes again and wakes every
// waiter (waiters also bound each wait by the holder's PTTL, so a lost message costs at most that).
// The connection is watched even with no subscription, so a dropped server is noticed at once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "connection.hpp"

namespace dlock::redis {

class channel_waiter;

// How a message on a channel wakes this process's waiters. A mutex's release can let one waiter
// in; a reader-writer lock's release can let every waiting reader in; a semaphore's release
// publishes the permits now free (Redisson's RPermitExpirableSemaphore), which can let that many in.
enum class wake_rule { one, all, published_count };

// The waiters of this process on one channel, in arrival order, and the wake-ups (release
// messages) that found none of them parked.
class channel_state {
 public:
  // Waiters of this process are parked on this channel or retrying after a wake-up: a newcomer
  // queues behind them instead of trying first, so a thread that releases and at once acquires
  // again does not take the lock from the waiter its release woke (in-process fairness).
  bool has_waiters() const;

 private:
  friend class subscriber;
  friend class channel_waiter;
  struct parked {
    std::condition_variable_any woken_cv;
    bool woken = false;
  };
  void wake_one_locked();  // a release message: the oldest parked waiter, or a kept wake-up
  void wake_all_locked();  // every parked waiter, and a kept wake-up for each one between tries
  void on_message_locked(std::string_view payload);  // by `rule_`

  wake_rule rule_ = wake_rule::one;  // set when the channel is first subscribed

  mutable std::mutex mutex_;
  std::condition_variable_any confirmed_cv_;  // waited on with the acquire's stop (spi::wait_until)
  bool confirmed_ = false;
  std::size_t users_ = 0;     // subscriptions of this process's waiting calls
  std::size_t retrying_ = 0;  // waiters holding a wake-up (retrying the acquire now)
  std::size_t kept_ = 0;      // wake-ups no parked waiter took yet (at most users_)
  std::uint64_t next_ticket_ = 0;
  std::map<std::uint64_t, parked*> parked_;  // by ticket: the oldest waiter is woken first
};

// One waiting acquire's place in its process's line for a channel: a ticket taken when it
// starts waiting and kept across retries, so a waiter that was woken and lost the lock to a
// newcomer of another process is still the next one woken.
class channel_waiter {
 public:
  explicit channel_waiter(std::shared_ptr<channel_state> state);
  ~channel_waiter();  // leaves the line; a wake-up it holds was used by its last retry
  channel_waiter(const channel_waiter&) = delete;
  channel_waiter& operator=(const channel_waiter&) = delete;

  // Parks until a release message is handed to this waiter (true) or until `until` (false).
  // A kept wake-up is taken at once.
  bool wait(std::chrono::steady_clock::time_point until);
  // Leaving without having retried usefully (its retry failed with an error): hand the wake-up
  // it holds to the next waiter, which would otherwise sleep until its PTTL bound.
  void pass_on();
  bool has_others_waiting() const { return state_->has_waiters(); }

 private:
  void drop_wake_locked();
  std::shared_ptr<channel_state> state_;
  std::uint64_t ticket_;
  bool holds_wake_ = false;  // under state_->mutex_
};

// Sharded pub/sub on a Redis Cluster (Redis 7: SSUBSCRIBE, answered by the master of the channel's
// slot only). The subscriber then keeps a connection per master that serves a subscribed channel.
// When a slot moves (the node answers an SSUBSCRIBE with MOVED, or drops a channel with an
// unrequested SUNSUBSCRIBE as Redis does once the slot is gone), the channel is subscribed again on
// its new master and its waiters are woken, since a release may have been published meanwhile.
struct shard_routing {
  // Where the master serving `channel`'s slot is now (credentials from the subscriber's endpoint);
  // nullopt when no master is known.
  std::function<std::optional<endpoint>(std::string_view channel)> route;
  // A node refused or dropped a subscription: the slot map is stale (it must not block long).
  std::function<void()> moved;
};

class subscriber {
 public:
  // `on_drop` runs on the subscriber's thread each time a connection is lost (server stopped,
  // restarted, connection killed); it must not block.
  // `open`: how its connection is opened (the pool's opener; default connection::open).
  // `shards`: sharded pub/sub (SSUBSCRIBE) on the master of each channel's slot; `open` is not used.
  explicit subscriber(endpoint where, std::function<void()> on_drop = {}, opener open = {},
                      std::optional<shard_routing> shards = {});
  ~subscriber();
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  // Subscribes (shared with other waiters of the same channel) and returns once the server has
  // confirmed the subscription, so a release published afterwards is never missed.
  // `rule`: how its messages wake waiters, fixed by the first subscription of the channel.
  std::shared_ptr<channel_state> subscribe(const std::string& channel, std::error_code& ec,
                                           wake_rule rule = wake_rule::one) noexcept;
  // The same, only when the channel is subscribed and confirmed already (for another waiter of
  // this process): no server traffic, and nullptr otherwise. A release that runs after this call
  // returns reaches the channel's waiters.
  std::shared_ptr<channel_state> join_subscribed(const std::string& channel) noexcept;
  void unsubscribe(const std::string& channel) noexcept;
  // The server moved (a failover): closes the connection; the thread opens another (through the
  // opener), subscribes again and wakes every waiter, as after a drop.
  void reconnect() noexcept;
  // Keeps a connection to `where` (a cluster master holding this process's leases) even with no
  // subscription on it, so that its death runs `on_drop` at once, not at the next renewal. Cheap
  // when it is watched already (no server traffic, no wake-up of the thread).
  void watch(const endpoint& where) noexcept;

 private:
  // One connection of the subscriber: the only one, or (sharded) the one to one master.
  struct link {
    std::unique_ptr<connection> conn;
    std::vector<std::string> pending;  // subscriptions sent and not confirmed yet, in order
    std::vector<std::string> leaving;  // unsubscriptions sent and not confirmed yet
  };
  void run();
  void wake() noexcept;
  // Queues every channel subscribed at `label` to be subscribed again, waking its waiters.
  void resubscribe_all_at(const std::string& label);
  void resubscribe_locked(const std::string& channel, channel_state& state);
  bool send_subscriptions();  // false when a wanted link could not be opened (retried soon)
  link* link_for(const std::string& label, const endpoint& where);
  void dispatch(redisReply* r, const std::string& label);

  endpoint where_;
  std::function<void()> on_drop_;
  opener open_;
  std::optional<shard_routing> shards_;
  bool reconnect_ = false;  // under mutex_
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<channel_state>, std::less<>> channels_;
  std::vector<std::string> to_subscribe_, to_unsubscribe_;
  std::vector<endpoint> to_watch_;
  std::set<std::string, std::less<>> watched_;  // labels of the watch links open or being opened
  bool stopping_ = false;
  int wake_pipe_[2] = {-1, -1};
  // Only the thread touches these: the links by endpoint label ("" for the one link of an
  // unsharded subscriber), and where each channel was last subscribed.
  std::map<std::string, link> links_;
  std::map<std::string, std::string, std::less<>> subscribed_at_;
  bool had_connection_ = false;  // unsharded: the one link was up (on_drop_ runs when it goes)
  std::thread thread_;
};

}  // namespace dlock::redis
