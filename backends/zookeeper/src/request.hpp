#pragma once
// ZooKeeper requests whose answer is waited for until a deadline, never longer.
//
// The C client's synchronous calls wait until the server answers or until the client gives the
// connection up: 2/3 of a session timeout without a packet from a server that accepts and never
// answers, then the next host, whatever the caller's deadline (a 1 s acquire took 10 s). Each call
// here sends the request asynchronously and waits for its answer until `deadline`. Past it, it
// returns ZOPERATIONTIMEOUT, a transient failure like the client's own timeout, and leaves the
// answer to the completion, which owns everything it writes to. A request not answered in time may
// still be applied: the callers treat a create that timed out as a lost reply (node_creation.cpp:
// its node is found by its UUID or deleted in the background) and a delete that timed out as not
// done (the session's background deleter takes it over).
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dlock/acquire_stop.hpp"
#include "session.hpp"

namespace dlock::zookeeper::request {

using clock = std::chrono::steady_clock;

// How long past an acquire's deadline its last requests may take: the last look at the queue and
// the withdrawal of our node (and, for a try, the whole attempt). No acquire waits for a server
// longer than its deadline plus this (README: "Deadlines").
inline constexpr std::chrono::milliseconds grace{1000};

// deadline + grace, saturated (acquire() waits with time_point::max()).
inline clock::time_point answer_deadline(clock::time_point deadline) noexcept {
  return deadline >= clock::time_point::max() - grace ? clock::time_point::max() : deadline + grace;
}

// The answer of one asynchronous request, shared by the caller and the completion.
template <class Value>
struct reply {
  std::mutex mutex;
  std::condition_variable_any answered;
  bool done = false;
  int rc = ZOK;
  Value value{};
};

// One request in flight. `send(const void* data)` issues the asynchronous call with `data` (a heap
// shared_ptr<reply<Value>> that the completion takes over with `taken`); wait() then waits for its
// answer until a deadline. Several may be in flight at once: the server answers one session's
// requests in the order they were sent.
template <class Value>
class pending {
 public:
  // Constrained to senders, so that it never stands in for the copy or move constructor.
  template <class Send>
  requires std::is_invocable_r_v<int, Send&, const void*>
  // NOLINTNEXTLINE(bugprone-forwarding-reference-overload): clang-tidy 14 does not read the requires clause
  explicit pending(Send&& send) : reply_(std::make_shared<reply<Value>>()) {
    auto owned = std::make_unique<std::shared_ptr<reply<Value>>>(reply_);
    const int rc = send(static_cast<const void*>(owned.get()));
    if (rc == ZOK) {
      (void)owned.release();  // the completion's now
    } else {
      reply_->done = true;  // not sent: no completion will come
      reply_->rc = rc;
    }
  }
  // The ZooKeeper code of the answer, or ZOPERATIONTIMEOUT when none came by `deadline` or the
  // acquire around it was asked to stop (the caller's failure path then cleans up as after a
  // timeout: a node the request may still create is deleted in the background).
  int wait(clock::time_point deadline) {
    std::unique_lock lock(reply_->mutex);
    if (!spi::wait_until(reply_->answered, lock, deadline, [&] { return reply_->done; })) return ZOPERATIONTIMEOUT;
    return reply_->rc;
  }
  Value& value() { return reply_->value; }  // after wait() returned ZOK

  // In a completion: the reply `data` points to, owned from here on.
  static std::shared_ptr<reply<Value>> taken(const void* data) {
    std::unique_ptr<std::shared_ptr<reply<Value>>> owned(
        static_cast<std::shared_ptr<reply<Value>>*>(const_cast<void*>(data)));
    return std::move(*owned);
  }
  // In a completion: records the answer and wakes the caller, if it still waits.
  template <class Fill>
  static void answer(const void* data, int rc, Fill&& fill) {
    const auto r = taken(data);
    std::lock_guard lock(r->mutex);
    r->rc = rc;
    if (rc == ZOK) fill(r->value);
    r->done = true;
    r->answered.notify_all();
  }

 private:
  std::shared_ptr<reply<Value>> reply_;
};

// get_children of `path` (with the session's watcher when `watch`), in flight.
class children_request {
 public:
  children_request(session& s, const std::string& path, bool watch = false);
  // ZOK with the names in `out` (emptied first), or the code.
  int wait(clock::time_point deadline, std::vector<std::string>& out);

 private:
  pending<std::vector<std::string>> pending_;
};

struct created_node {
  std::string path;  // with the sequence number ZooKeeper appended
  Stat stat{};
};

// create (ephemeral, sequential, container, ... as `mode`); `out` may be null.
int create(session& s, const std::string& path, std::string_view data, const ACL_vector* acl, int mode,
           clock::time_point deadline, created_node* out = nullptr);
// get_children of `path` into `out` (emptied first).
int children(session& s, const std::string& path, clock::time_point deadline, std::vector<std::string>& out,
             bool watch = false);
// exists; with `watch`, leaves the session's watcher on the path (session::path_watch waits for it).
int exists(session& s, const std::string& path, clock::time_point deadline, Stat* out, bool watch = false);
// get: the node's data into `out` (emptied first), and its Stat into `stat` when given.
int data(session& s, const std::string& path, clock::time_point deadline, std::string& out, Stat* stat = nullptr);
// delete, any version.
int remove(session& s, const std::string& path, clock::time_point deadline);

}  // namespace dlock::zookeeper::request
