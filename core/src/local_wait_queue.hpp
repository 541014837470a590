#pragma once
// The fair hand-off of the polling wait, inside one process: the threads waiting for one name
// through one backend object stand in a FIFO line, and only its head asks the server. A release
// of that name by this process wakes the head at once (it tries now, not after its backoff), and a
// newcomer, the releaser coming straight back included, joins the tail instead of trying first.
//
// Without it, the releaser's thread re-acquires in the microseconds after its release while the
// waiters sleep 10..800 ms between polls: on memcached, 67 hand-offs in 3 s against 5,589 cycles,
// on file:// 8. Across processes nothing changes: each process's head still polls the server
// (or waits on it, where the backend has a release_watch), and whichever process asks first wins.
//
// Backends whose server queues waiters (Redis, ZooKeeper, PostgreSQL NOTIFY, memory://) override
// do_acquire_until and never stand in this line; their grants still report releases here, which
// costs one atomic load when nobody waits.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

class local_wait_queues;

// One name's line in one backend object. Shared by every lock object of that name made by the
// backend object, and by their grants (which report their release to it).
class local_wait_queue {
 public:
  using clock = std::chrono::steady_clock;

  local_wait_queue(std::string name, std::shared_ptr<local_wait_queues> registry);
  ~local_wait_queue();
  local_wait_queue(const local_wait_queue&) = delete;
  local_wait_queue& operator=(const local_wait_queue&) = delete;

  // Someone of this process is in line: a try (no wait) must not overtake them.
  bool has_waiters() const noexcept { return waiting_.load() != 0; }

  // For reentrant backends: does `owner` hold a grant of this name taken through this line? Its
  // re-entry must not queue behind waiters who wait for that very grant.
  bool held_by(const std::string& owner) const;
  void add_holder(const std::string& owner);
  // A grant of this name, taken through this line, was released (or dropped): the head may try
  // now. `owner` is the holder recorded by add_holder, or nullptr when none was recorded.
  void released(const std::string* owner) noexcept;

  // One waiter's place in line, on its own thread's stack: joins the tail on construction, leaves
  // on destruction (a head that leaves without the lock hands the head on, and the next tries at
  // once: the lock may be free).
  class place {
   public:
    explicit place(local_wait_queue& queue);
    ~place();
    place(const place&) = delete;
    place& operator=(const place&) = delete;

    // Sleeps until this place is the head, or the deadline or a stop request of the thread's
    // acquire (false). Waiters behind the head never ask the server.
    bool wait_to_be_head(clock::time_point deadline);
    // Head only. Should the head try at once? Not when the head before it left with the lock:
    // then it is held here, and its release (counted after releases_at_head()) wakes us.
    bool try_at_once() const;
    std::uint64_t releases_at_head() const;
    // Head only: the count of releases reported so far, read before an attempt.
    std::uint64_t releases_seen() const;
    // Head only: sleeps until a release after `seen`, `until`, or a stop request.
    void wait_for_release(std::uint64_t seen, clock::time_point until);
    // Head only: we got the lock. The next head waits for its release instead of trying now.
    void leave_with_grant() noexcept;

   private:
    friend class local_wait_queue;
    void leave_locked(bool with_grant) noexcept;

    local_wait_queue& queue_;
    std::list<place*>::iterator where_;
    bool in_line_ = true;
    bool head_ = false;
    bool try_at_once_ = true;
    std::uint64_t releases_at_head_ = 0;
    std::condition_variable_any wake_;
  };

 private:
  std::string name_;
  std::shared_ptr<local_wait_queues> registry_;
  mutable std::mutex mutex_;
  std::list<place*> line_;  // arrival order; line_.front() is the head
  std::atomic<std::size_t> waiting_{0};
  std::uint64_t releases_ = 0;
  std::vector<std::pair<std::string, std::size_t>> holders_;  // owner -> live grants (reentrant only)
};

// The lines of one backend object, by name. A line lives while a lock object or a grant of its
// name does.
class local_wait_queues : public std::enable_shared_from_this<local_wait_queues> {
 public:
  std::shared_ptr<local_wait_queue> for_name(const std::string& name);

 private:
  friend class local_wait_queue;
  void forget(const std::string& name) noexcept;

  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<local_wait_queue>> by_name_;
};

// What a grant taken through a line keeps: it reports its release to that line exactly once, on
// release or, failing that, when the grant's state is destroyed.
class local_hold {
 public:
  local_hold(std::shared_ptr<local_wait_queue> queue, std::string owner, bool counted);
  ~local_hold();
  local_hold(const local_hold&) = delete;
  local_hold& operator=(const local_hold&) = delete;
  void end() noexcept;

 private:
  std::shared_ptr<local_wait_queue> queue_;
  std::string owner_;
  bool counted_;
  bool ended_ = false;
};

}  // namespace dlock::detail
