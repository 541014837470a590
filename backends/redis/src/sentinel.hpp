#pragma once
// Redis Sentinel for redis+sentinel://, redis+reentrant+sentinel://, redis+fair+sentinel://: where
// the master is, and following it when it moves. Internal to the redis backends.
//
// The sentinels are asked in turn (the one that answered last first) SENTINEL
// get-master-addr-by-name; every new connection to the answer is checked with ROLE, so a lock
// command never goes to a replica (a sentinel may still name the old master during a failover).
// A thread per sentinel follows the master: subscribed to +switch-master and +promoted-slave (the
// first sentinel to say so wins; asking again after each reconnect, since a switch may have
// happened meanwhile), it tells the backend, which closes its pooled connections and its subscriber's (they reconnect
// to the new master through open_master). A connection error or a READONLY reply also makes the
// next connection ask again.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "connection.hpp"

namespace dlock {
class uri;
}

namespace dlock::redis {

struct sentinel_settings {
  std::string master_name;          // the master set: the URI's path
  std::vector<endpoint> sentinels;  // each with the sentinels' own credentials (sentinel_user/_password)
};

// The sentinels and the master set from a redis+...+sentinel:// URI (the master's own endpoint,
// credentials and db come from parse_settings). Throws dlock::error(invalid_uri).
sentinel_settings parse_sentinel_settings(const uri& u, const endpoint& master);

class sentinel_watch {
 public:
  explicit sentinel_watch(sentinel_settings s);
  ~sentinel_watch() { stop(); }
  sentinel_watch(const sentinel_watch&) = delete;
  sentinel_watch& operator=(const sentinel_watch&) = delete;

  // A connection to the master (`where` gives credentials, db and timeouts; host and port are the
  // sentinels'), checked with ROLE. nullptr + ec: no sentinel reachable (backend_unavailable), the
  // master set unknown or a server that is no sentinel (backend_error), the master not reachable
  // or not a master yet (backend_unavailable).
  std::unique_ptr<connection> open_master(const endpoint& where, std::error_code& ec) noexcept;
  // Follows +switch-master from now on; `moved` runs on the watch's thread after each switch (or a
  // change found on reconnecting), and must not block.
  void follow(std::function<void()> moved);
  void stop() noexcept;  // joins the threads; `moved` is not called afterwards
  // "master set 'mymaster' (sentinels 127.0.0.1:26379,...)"
  std::string label() const;

 private:
  struct address {
    std::string host;
    std::uint16_t port = 0;
    bool operator==(const address&) const = default;
  };
  std::optional<address> ask(std::error_code& ec) noexcept;  // asks the sentinels in turn
  std::unique_ptr<connection> open_sentinel(std::size_t index, std::chrono::milliseconds read_timeout,
                                            std::error_code& ec) noexcept;
  void forget(const address& stale) noexcept;
  // the master moved to `now` from `replaced`: tells `moved`
  void learned(const address& now, std::optional<address> replaced) noexcept;
  // The answer of sentinel `index`, cached unless a switch was announced since `switches_seen`
  // (then the announced master, newer than any answer asked before it, is returned).
  address settle(const address& found, std::size_t index, std::uint64_t switches_seen) noexcept;
  void run(std::stop_token stop, std::size_t index) noexcept;

  sentinel_settings cfg_;
  std::mutex mutex_;
  std::optional<address> master_;     // the last answer, until it fails
  std::size_t preferred_ = 0;         // the sentinel that answered last
  std::optional<address> announced_;  // the last master a sentinel announced (told once per switch)
  // The master the last announced switch replaced: a sentinel that has not heard of the switch
  // yet still names it (and it may still say ROLE master, in a manual failover), so an answer
  // naming it is taken only when no sentinel names another.
  std::optional<address> replaced_;
  std::uint64_t switches_ = 0;  // switches announced so far
  std::function<void()> moved_;
  std::vector<std::jthread> threads_;  // one per sentinel
};

}  // namespace dlock::redis
