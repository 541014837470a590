#pragma once
// One hiredis connection and a pool of them per server. Internal to the redis backends.
//
// A connection is opened with a connect timeout, authenticates (AUTH user password for ACL users,
// AUTH password otherwise), selects the database and PINGs, so a wrong password, an unreachable
// host and a server that does not speak Redis each fail at open time with their own errc and a
// message that names the endpoint but never the password.
#include <hiredis/hiredis.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock::redis {

struct context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

// Whether a wait begun now ends at the acquire's stop request: inside an acquire that can be
// stopped (the forms that take a std::stop_token) and not yet asked to. A connect, a wait for a
// pooled connection or for a turn in the pipeline begun after the stop request runs to its end: a
// withdrawal or a release may need it.
bool abandoned_at_stop() noexcept;

// Where and how to connect. The password stays here and in AUTH; never in a message.
struct endpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string user;                     // empty: the default user
  std::optional<std::string> password;  // nullopt: no AUTH
  int db = 0;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};
  // Read the server's run_id and uptime (INFO server) when connecting: the redis backends need
  // them to refuse grants while a restarted server is younger than a ttl (wait_after_restart).
  bool learn_server_start = false;

  std::string label() const;  // "127.0.0.1:6379" (what messages name)
};

// A Lua script with its SHA-1, run by EVALSHA and loaded again on NOSCRIPT.
struct script {
  explicit script(std::string src);
  std::string source;
  std::string sha1;  // 40 lower-case hex digits
};

class connection {
 public:
  // Connects, authenticates, selects the database and PINGs. nullptr + ec on failure.
  static std::unique_ptr<connection> open(const endpoint& where, std::error_code& ec) noexcept;

  // One command, arguments as binary-safe strings. nullptr + ec on I/O failure (the connection is
  // then broken). A Redis error reply is returned as a reply of type REDIS_REPLY_ERROR.
  reply_ptr command(const std::vector<std::string_view>& args, std::error_code& ec) noexcept;
  // EVALSHA, falling back to EVAL when the server answers NOSCRIPT (restart, SCRIPT FLUSH).
  reply_ptr eval(const script& s, const std::vector<std::string_view>& keys, const std::vector<std::string_view>& args,
                 std::error_code& ec) noexcept;

  // EVAL with the source, never EVALSHA: for a request that must run even if its reply is never
  // read (a NOSCRIPT answer would go unseen).
  reply_ptr eval_source(const script& s, const std::vector<std::string_view>& keys,
                        const std::vector<std::string_view>& args, std::error_code& ec) noexcept;

  // Pipelining for Redlock: append now, flush and read later (in parallel across servers).
  bool append(const std::vector<std::string_view>& args) noexcept;
  bool append_eval(const script& s, const std::vector<std::string_view>& keys,
                   const std::vector<std::string_view>& args) noexcept;
  // A command already in the protocol's form (pipeline.cpp formats them in the callers' threads).
  bool append_formatted(std::string_view command) noexcept;
  bool flush() noexcept;
  reply_ptr read(std::error_code& ec) noexcept;

  bool broken() const noexcept { return broken_; }
  // Marks it unusable (it answered READONLY: a replica now): the pool drops it when it comes back.
  void discard() noexcept { broken_ = true; }
  // Commands sent whose replies were not read: after a failed read, the server may still have
  // run them (their outcome is unknown).
  std::size_t unanswered() const noexcept { return unanswered_; }
  // The last failure was a read timeout: the stream is intact and the replies may still come.
  bool timed_out() const noexcept { return timed_out_; }
  // After a read timeout, makes the connection usable again to read the late replies (hiredis
  // refuses every call once its context has an error). false if the failure was not a timeout.
  bool resume_after_timeout(std::chrono::milliseconds read_timeout) noexcept;
  void set_read_timeout(std::chrono::milliseconds read_timeout) noexcept;
  // For an idle connection (nothing unanswered): the server has closed it (restart, timeout,
  // CLIENT KILL), which a poll() shows without a round trip.
  bool closed_by_server() const noexcept;

  // From INFO server at open (endpoint::learn_server_start), else empty / the epoch.
  const std::string& run_id() const noexcept { return run_id_; }
  // The latest instant at which the server can have started: its uptime_in_seconds, a difference
  // of whole wall-clock seconds, can exceed its real age by up to a second (see learn_server_start).
  std::chrono::steady_clock::time_point server_started_by() const noexcept { return server_started_by_; }
  const endpoint& where() const noexcept { return where_; }
  redisContext* raw() noexcept { return context_.get(); }
  // The server's CLIENT ID of this connection (tests use it with CLIENT KILL ID).
  std::int64_t client_id(std::error_code& ec) noexcept;

 private:
  connection(endpoint where, context_ptr context) : where_(std::move(where)), context_(std::move(context)) {}
  void fail(std::error_code& ec, const std::string& doing) noexcept;
  bool learn_server_start(std::error_code& ec) noexcept;

  endpoint where_;
  context_ptr context_;
  bool broken_ = false;
  bool timed_out_ = false;
  std::size_t unanswered_ = 0;
  std::string run_id_;
  std::chrono::steady_clock::time_point server_started_by_{};
  friend class pool;
  std::uint64_t generation_ = 0;  // the pool's generation when it was opened (pool::retire_all)
};

// How a pool (and a subscriber) opens a connection to the server it serves: by default
// connection::open(where). The Sentinel schemes pass one that connects to wherever the sentinels
// say the master is now, and checks with ROLE that it is (sentinel.hpp).
using opener = std::function<std::unique_ptr<connection>(const endpoint& where, std::error_code& ec)>;

// Text of an error reply, or empty.
std::string_view error_text(const redisReply* r) noexcept;
bool is_error(const redisReply* r, std::string_view prefix) noexcept;

// A bounded pool of connections to one server. Connections found broken are dropped, and the
// next checkout opens a fresh one: that is the reconnect after a dropped connection or a restart.
// An idle connection the server has closed meanwhile is dropped at checkout, so the first
// command after a restart does not fail on a dead socket. When all max_size connections are out,
// callers wait in arrival order, each given the next connection that comes back (or the room to
// open one), until their own deadline.
class pool : public std::enable_shared_from_this<pool> {
 public:
  pool(endpoint where, std::size_t max_size, opener open = {});

  class handle {
   public:
    handle() = default;
    handle(std::shared_ptr<pool> owner, std::unique_ptr<connection> c) : owner_(std::move(owner)), c_(std::move(c)) {}
    handle(handle&&) noexcept = default;
    // Gives the connection held so far back to the pool first (the default would close it
    // without the pool knowing, and its slot would stay counted forever).
    handle& operator=(handle&& other) noexcept;
    ~handle();
    connection* operator->() const noexcept { return c_.get(); }
    connection& operator*() const noexcept { return *c_; }
    explicit operator bool() const noexcept { return c_ != nullptr; }

   private:
    std::shared_ptr<pool> owner_;
    std::unique_ptr<connection> c_;
  };

  // Waits, when all max_size connections are checked out, until `deadline` (time_point::max():
  // as long as it takes), then fails with backend_unavailable naming pool_size.
  handle checkout(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
  // For calls without a deadline of their own (try_acquire, release, renew): waits up to the
  // connect timeout.
  handle checkout(std::error_code& ec) noexcept;
  const endpoint& where() const noexcept { return where_; }
  std::size_t max_size() const noexcept { return max_size_; }
  // Called (from the thread that noticed it, without pool locks held; it must not block) when
  // a connection was found closed or broken, or a new connection met a server with another
  // run_id than the previous one: the server may have restarted and lost its keys.
  void on_server_change(std::function<void()> listener);
  // The server moved (a failover): the idle connections are closed, those checked out are closed
  // when they come back, and the next checkouts open new ones (through the opener). Then the
  // server-change listener runs, as after a restart.
  void retire_all() noexcept;

 private:
  // A caller in line for a connection; the pool hands it one, or the room to open one.
  struct waiter {
    std::condition_variable served_cv;
    bool served = false;
    bool stopped = false;               // the caller's acquire was asked to stop while it waited (under mutex_)
    std::unique_ptr<connection> given;  // empty when served with room to open a connection
  };
  void serve_next_locked(std::unique_ptr<connection> c) noexcept;    // c empty: room for one more
  handle open_new(bool closed_found, std::error_code& ec) noexcept;  // a slot is counted already
  void give_back(std::unique_ptr<connection> c) noexcept;
  void server_changed() noexcept;
  void note_run_id(const std::string& run_id) noexcept;

  endpoint where_;
  std::size_t max_size_;
  opener open_;
  std::mutex mutex_;
  std::uint64_t generation_ = 0;  // raised by retire_all
  std::vector<std::unique_ptr<connection>> idle_;
  std::deque<waiter*> waiting_;  // arrival order
  std::size_t open_count_ = 0;   // connections out, idle or being opened (at most max_size_)
  std::string last_run_id_;
  std::function<void()> listener_;
};

}  // namespace dlock::redis
