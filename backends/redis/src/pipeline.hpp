#pragma once
// Auto-pipelining over a pool: requests from many threads share the pool's few connections, as
// Lettuce, ioredis or StackExchange.Redis do, so 128 threads need no 128 connections and no caller
// waits for another's round trip to end before its own command can go.
//
// Flat combining, with no thread of its own: a caller appends its formatted command to one queue.
// While fewer batches than the pool has connections are in flight, the caller leads a batch: it
// checks a connection out, takes every request queued so far, writes them all in one write,
// reads their replies in order and hands each to its caller; then the oldest request queued
// meanwhile leads the next batch. A request still queued when its caller's deadline passes is
// withdrawn, never sent; one sent gets its reply, or the connection has failed (command_timeout,
// dropped) and every request of the batch not answered yet fails as backend_unavailable, exactly
// as one command on a broken connection fails. An EVALSHA answered NOSCRIPT is sent again as EVAL
// with the source, in the same batch's turn on the same connection. A request answered READONLY
// (the server is a replica now: a failover) fails as backend_unavailable, and the pool closes its
// connections (retire_all) so the next ones go to the master (through the pool's opener).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "connection.hpp"

namespace dlock::redis {

// The replies still owed on the connection of a batch that failed on a read timeout: the server
// may still run those commands and answer. An acquire whose reply was lost reads its late reply
// here (so it can undo a grant nobody received) and sends the undo on this same connection, after
// the grant. Shared by the batch's failed requests; the connection goes back to the pool (and is
// dropped if replies are still owed) when the last of them lets go. After any other failure the
// connection is gone at once and nothing can be read.
class late_replies {
 public:
  late_replies(pool::handle c, std::size_t owed) noexcept;
  // The reply of the index-th request still owed (0: the first whose reply was missing). The
  // first call reads every owed reply, waiting in slices of `slice` until `give_up_at` or `stop`;
  // when one stays missing, the connection is dropped. nullptr: that reply never came.
  reply_ptr take(std::size_t index, std::chrono::milliseconds slice, std::stop_token stop,
                 std::chrono::steady_clock::time_point give_up_at) noexcept;
  // Runs `use` on the connection once every owed reply has been read (a command sent now is
  // answered next); false when the connection is gone.
  bool with_connection(const std::function<void(connection&)>& use) noexcept;

 private:
  std::mutex mutex_;
  pool::handle c_;
  std::size_t owed_;
  bool read_all_tried_ = false;
  std::vector<reply_ptr> got_;
};

class pipeline {
 public:
  using clock = std::chrono::steady_clock;

  // One batch in flight per pooled connection at most (the pool's max_size).
  explicit pipeline(std::shared_ptr<pool> connections);

  struct outcome {
    reply_ptr reply;  // the server's answer (an error reply included); null when not answered
    // The caller's deadline passed while the request was queued: never sent.
    bool withdrawn = false;
    // The request asked for a server at least `min_server_age` old and this one is younger by
    // this much (the connection's server_started_by()): not sent.
    std::chrono::milliseconds server_young{0};
    std::string run_id;  // of that server
    // Sent, but its reply is missing (ec set): where a late reply may still be read. When only
    // the trailer's reply is missing, `reply` holds the request's own and late_index is npos.
    std::shared_ptr<late_replies> late;
    std::size_t late_index = 0;
    // The reply of the trailer (a command sent right after the request, on its connection).
    reply_ptr trailer;
  };

  // EVALSHA of `s` (EVAL with the source on NOSCRIPT), or EVAL with the source when `source_only`
  // (for a request that must run even if its reply is never read). Waits until the reply, or
  // until `deadline` while the request is still queued. ec is set (with last_error_message())
  // when the request failed; not when it was withdrawn or the server is young.
  // `trailer`: a command that must run right after this one on the same connection (WAIT after a
  // grant, replication.hpp); its reply is outcome::trailer. Empty: none.
  outcome eval(const script& s, const std::vector<std::string_view>& keys, const std::vector<std::string_view>& args,
               clock::time_point deadline, std::chrono::milliseconds min_server_age, std::error_code& ec,
               bool source_only = false, const std::vector<std::string_view>& trailer = {}) noexcept;
  // Any command, arguments as binary-safe strings.
  outcome command(const std::vector<std::string_view>& args, clock::time_point deadline, std::error_code& ec) noexcept;

  // What tests observe: batches written, and requests sent in them (NOSCRIPT retries included).
  std::uint64_t batches_sent() const noexcept { return batches_.load(std::memory_order_relaxed); }
  std::uint64_t requests_sent() const noexcept { return requests_.load(std::memory_order_relaxed); }
  std::size_t lanes() const noexcept { return lanes_; }
  // Requests waiting for their batch (what a test sees before it stops one of them).
  std::size_t queued() noexcept {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }

 private:
  // One request, on its caller's stack: the caller is blocked in submit() until it is finished or
  // withdrawn, so the leader may use it (and the views it points to) until it finishes it.
  struct node;
  void submit(node& me) noexcept;
  void lead(node& me) noexcept;
  void hand_off() noexcept;
  void exchange(pool::handle& c, std::vector<node*>& nodes) noexcept;
  outcome finish_call(node& me, std::error_code& ec) noexcept;

  std::shared_ptr<pool> pool_;
  std::size_t lanes_;
  std::mutex mutex_;
  std::deque<node*> queue_;  // arrival order
  std::size_t leaders_ = 0;  // batches being led (checking out, writing or reading); at most lanes_
  std::atomic<std::uint64_t> batches_{0}, requests_{0};
};

}  // namespace dlock::redis
