#include <dlock/detail/async_waiters.hpp>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

namespace {

using clock = std::chrono::steady_clock;

// A line whose queue stayed empty this long, or a round-trip thread that had no task for as long,
// gives its thread back; a service that takes locks again soon reuses the thread instead of
// starting one per acquire, and a burst leaves no threads behind.
constexpr auto idle_thread_lifetime = std::chrono::seconds(2);

// queued: behind the head; first_try: the head, its first try waiting for a round-trip thread;
// at_head: the head, its acquire running (a first try, or the line thread's wait); done.
enum class wait_state { queued, first_try, at_head, done };

struct line_key_hash {
  std::size_t operator()(const line_key& k) const noexcept {
    return std::hash<const void*>{}(k.object) ^ (std::hash<unsigned>{}(k.kind) * 0x9e3779b97f4a7c15ULL);
  }
};

class async_line;
class engine;
engine& the_engine();

}  // namespace

class async_wait {
 public:
  async_wait(std::weak_ptr<async_line> line, blocking_acquire acquire, clock::time_point deadline,
             std::unique_ptr<async_completion> done)
      : line(std::move(line)), acquire(std::move(acquire)), deadline(deadline), done(std::move(done)) {}

  const std::weak_ptr<async_line> line;
  const blocking_acquire acquire;
  const clock::time_point deadline;
  std::stop_source head_stop;  // stops the blocking acquire while this wait is the head
  // Guarded by the line's mutex.
  wait_state state = wait_state::queued;
  std::unique_ptr<async_completion> done;
  // Guarded by the engine's timer mutex: this wait's place among the deadlines, while it has one.
  std::optional<std::multimap<clock::time_point, std::weak_ptr<async_wait>>::iterator> deadline_entry;
};

namespace {

class async_line {
 public:
  explicit async_line(line_key key) : key_(key) {}
  async_line(const async_line&) = delete;
  async_line& operator=(const async_line&) = delete;
  ~async_line() = default;  // thread_ (declared last) is stopped and joined first

  // Called with the engine's mutex held (so the line cannot retire meanwhile, and no other wait
  // can join in between). True: `wait` is the head at once (nothing queued, no head), and the
  // caller makes its first try. Otherwise it is queued, and the line's thread will lead it.
  bool join(std::shared_ptr<async_wait> wait) {
    {
      std::lock_guard lock(mutex_);
      if (!head_ && queue_.empty()) {
        head_ = true;
        wait->state = wait_state::first_try;
        return true;
      }
      queue_.push_back(std::move(wait));
      start_thread();
    }
    wake_.notify_one();
    return false;
  }
  // Whether a wait joining now would stand behind another (a head, or waits queued before it).
  // Called with the engine's mutex held, as join.
  bool occupied() {
    std::lock_guard lock(mutex_);
    return head_ || !queue_.empty();
  }
  // A round-trip thread is about to make the head's first try: false when a cancel already
  // completed the wait.
  bool begin_first_try(async_wait& head) {
    std::lock_guard lock(mutex_);
    if (head.state != wait_state::first_try) return false;
    head.state = wait_state::at_head;
    return true;
  }
  // The head's first try found the name held and it may still wait: the line's thread goes on
  // with its blocking acquire.
  void hand_over(std::shared_ptr<async_wait> head) {
    {
      std::lock_guard lock(mutex_);
      handed_ = std::move(head);
      start_thread();
    }
    wake_.notify_one();
  }
  // The head's acquire returned `granted` and `ec`: completes it, unless the process is exiting
  // (`deliver` false: the completion is destroyed, not run). A grant that crossed a cancel is
  // given back at once, as the blocking API does.
  void finish_head(const std::shared_ptr<async_wait>& head, lease granted, std::error_code ec, bool deliver);
  // A queued wait, or a head whose first try has not started, completes at once; a head whose
  // acquire runs is stopped, and completes where it runs.
  void cancel(async_wait& wait);
  // A wait whose deadline came while queued, or while its first try waited for a round-trip
  // thread: empty lease, no error (try_acquire_until's timeout). A head whose acquire runs ends at
  // its deadline by that acquire.
  void expire(async_wait& wait) {
    std::unique_ptr<async_completion> done;
    bool next_leads = false;
    {
      std::lock_guard lock(mutex_);
      if (wait.state == wait_state::queued) {
        done = take_queued(wait);
      } else if (wait.state == wait_state::first_try) {
        done = take_unstarted_head(wait);
        next_leads = !queue_.empty();
      } else {
        return;
      }
    }
    if (next_leads) wake_.notify_one();
    done->complete({}, lease{});
  }
  // Nothing queued, no head.
  bool idle() {
    std::lock_guard lock(mutex_);
    return idle_locked();
  }
  // Idle, and no thread was ever started: nothing to join.
  bool idle_without_thread() {
    std::lock_guard lock(mutex_);
    return idle_locked() && !thread_.joinable();
  }
  bool has_thread() {
    std::lock_guard lock(mutex_);
    return thread_.joinable();
  }
  line_key key() const noexcept { return key_; }

 private:
  bool idle_locked() const { return queue_.empty() && !head_; }
  // With mutex_ held. A line's thread, once started, runs until the line retires (retire_if_idle)
  // or the engine stops; a retired line is out of the engine's map and gets no more waits.
  void start_thread() {
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token engine_stop) { run(engine_stop); });
  }
  // A head whose first try has not begun ends here: its round-trip task finds it done and makes no
  // try, and the next in line leads.
  std::unique_ptr<async_completion> take_unstarted_head(async_wait& wait) {
    wait.head_stop.request_stop();
    wait.state = wait_state::done;
    head_ = false;
    return std::move(wait.done);
  }
  std::unique_ptr<async_completion> take_queued(async_wait& wait) {
    std::erase_if(queue_, [&](const std::shared_ptr<async_wait>& w) { return w.get() == &wait; });
    wait.state = wait_state::done;
    return std::move(wait.done);
  }

  void run(std::stop_token engine_stop);

  const line_key key_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::deque<std::shared_ptr<async_wait>> queue_;
  bool head_ = false;                   // a head's acquire is running (a first try, or the thread's)
  std::shared_ptr<async_wait> handed_;  // a head handed over by its first try, for the thread
  std::jthread thread_;
};

// The round-trip threads: a first try and a release are each one bounded round trip and never wait
// for another holder, so a few threads serve any number of them, in the order they come. A thread
// is started when a task finds none free, up to round_trip_threads, and leaves after
// idle_thread_lifetime without a task. At exit they run what is still queued before they leave (a
// first try then completes nothing: its completion is destroyed, not run).
class round_trip_pool {
 public:
  round_trip_pool() = default;
  round_trip_pool(const round_trip_pool&) = delete;
  round_trip_pool& operator=(const round_trip_pool&) = delete;
  ~round_trip_pool() {
    std::list<std::jthread> threads;
    std::vector<std::jthread> retired;
    {
      std::lock_guard lock(mutex_);
      exiting_ = true;  // from here on no thread retires: each is stopped and joined below
      threads.swap(threads_);
      retired.swap(retired_);
    }
  }

  void post(std::function<void(const std::stop_token&)> task) {
    post(std::move(task), [] {});
  }
  // `behind_busy` runs when the task must wait for a thread (every thread has a task, and no more
  // may start), under the pool's lock: before any thread can take the task.
  template <class BehindBusy>
  void post(std::function<void(const std::stop_token&)> task, BehindBusy behind_busy) {
    std::vector<std::jthread> retired;
    {
      std::lock_guard lock(mutex_);
      retired.swap(retired_);
      tasks_.push_back(std::move(task));
      if (free_ < tasks_.size()) {
        if (threads_.size() < round_trip_threads) {
          auto self = threads_.emplace(threads_.end());
          *self = std::jthread([this, self](std::stop_token stop) { run(stop, self); });
          return;  // `retired` are joined on the way out: they have returned or are returning
        }
        behind_busy();
      }
    }
    wake_.notify_one();
  }

  // Retired threads are not counted: they have returned, or return as soon as the lock is free.
  std::size_t threads() {
    std::lock_guard lock(mutex_);
    return threads_.size();
  }

 private:
  // `self`: this thread's place in threads_, valid while it is there (list iterators stay valid).
  void run(std::stop_token stop, std::list<std::jthread>::iterator self) {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++free_;
      const bool got = wake_.wait_for(lock, stop, idle_thread_lifetime, [&] { return !tasks_.empty(); });
      --free_;
      if (!got) {
        // Idle: the thread moves itself to retired_, to be joined by another one (a later post, or
        // the pool's destructor); at exit it is in a local list of the destructor instead.
        if (!stop.stop_requested() && !exiting_) {
          retired_.push_back(std::move(*self));
          threads_.erase(self);
        }
        return;
      }
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task(stop);
      task = nullptr;  // what it holds goes before the lock is taken again
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::deque<std::function<void(const std::stop_token&)>> tasks_;
  std::size_t free_ = 0;  // threads waiting for a task
  bool exiting_ = false;
  std::list<std::jthread> threads_;
  std::vector<std::jthread> retired_;  // left after an idle spell; returned or returning
};

class engine {
 public:
  engine() = default;
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  ~engine() {
    // The timer first, so that no deadline completes a wait from here on; then the lines (their
    // threads are stopped and joined: a head's acquire ends by its stop); then the round-trip
    // threads. Completions still pending are destroyed, not run: the process is exiting.
    {
      std::jthread timer;
      {
        std::lock_guard lock(timer_mutex_);
        timer.swap(timer_);
      }
    }
    std::unordered_map<line_key, std::shared_ptr<async_line>, line_key_hash> lines;
    std::vector<std::shared_ptr<async_line>> retired;
    {
      std::lock_guard lock(mutex_);
      lines.swap(lines_);
      retired.swap(retired_);
    }
  }

  async_wait_handle start(line_key key, blocking_acquire acquire, clock::time_point deadline,
                          std::unique_ptr<async_completion> done) {
    std::shared_ptr<async_wait> wait;
    std::shared_ptr<async_line> first_try;
    std::vector<std::shared_ptr<async_line>> finished;
    {
      std::lock_guard lock(mutex_);
      finished.swap(retired_);
      auto& line = lines_[key];
      if (!line) line = std::make_shared<async_line>(key);
      wait = std::make_shared<async_wait>(line, std::move(acquire), deadline, std::move(done));
      // A wait that becomes the head at once ends at its deadline by its own acquire: one queued
      // behind another needs the timer (which would otherwise be woken for every acquire), and so
      // does a first try that waits for a round-trip thread (below).
      if (line->occupied()) watch_deadline(wait);
      if (line->join(wait)) first_try = line;
    }
    // Joins the threads of lines that retired (they have returned or are returning).
    finished.clear();
    if (first_try) {
      // A first try that starts at once needs no timer: it is one round trip. One that waits for a
      // busy thread may see its deadline come first, and the timer ends it then; a deadline already
      // past keeps its one try, as try_acquire_until's does.
      round_trips_.post([this, line = std::move(first_try),
                         head = wait](const std::stop_token& exiting) { try_once(line, head, exiting); },
                        [&] {
                          if (wait->deadline > clock::now()) watch_deadline(wait);
                        });
    }
    return async_wait_handle(std::move(wait));
  }

  void release(lease held, std::unique_ptr<release_completion> done) {
    struct pending {
      lease held;
      std::unique_ptr<release_completion> done;
    };
    round_trips_.post(
        [release = std::make_shared<pending>(pending{std::move(held), std::move(done)})](const std::stop_token&) {
          std::error_code ec;
          release->held.release(ec);
          release->done->complete(ec);
        });
  }

  // From a line's idle thread: leaves the map if still idle. The line object moves to retired_, to
  // be destroyed (its thread joined) by another thread.
  bool retire_if_idle(async_line& line) {
    std::lock_guard lock(mutex_);
    auto it = lines_.find(line.key());
    if (it == lines_.end() || it->second.get() != &line || !line.idle()) return false;
    retired_.push_back(std::move(it->second));
    lines_.erase(it);
    return true;
  }

  void forget_deadline(async_wait& wait) {
    std::lock_guard lock(timer_mutex_);
    if (wait.deadline_entry) {
      deadlines_.erase(*wait.deadline_entry);
      wait.deadline_entry.reset();
    }
  }

  std::size_t threads() {
    std::size_t n = round_trips_.threads();
    std::lock_guard lock(mutex_);
    for (const auto& [key, line] : lines_) n += line->has_thread() ? 1 : 0;
    std::lock_guard timer_lock(timer_mutex_);
    return n + retired_.size() + (timer_.joinable() ? 1 : 0);
  }

 private:
  // The head's first try, one attempt on a round-trip thread: a grant, an error, a cancel or a
  // deadline already past completes it there; a name held by another goes on to the line's thread,
  // which waits for its release.
  void try_once(const std::shared_ptr<async_line>& line, const std::shared_ptr<async_wait>& head,
                const std::stop_token& exiting) {
    if (!line->begin_first_try(*head)) {  // canceled while it waited for this thread
      forget_if_unused(line);
      return;
    }
    std::error_code ec;
    auto granted = head->acquire(clock::now(), head->head_stop.get_token(), ec);
    if (!granted && !ec && !head->head_stop.stop_requested() && clock::now() < head->deadline &&
        !exiting.stop_requested()) {
      line->hand_over(head);
      return;
    }
    line->finish_head(head, std::move(granted), ec, !exiting.stop_requested());
    forget_if_unused(line);
  }

  // A line that never needed its thread leaves the map once idle (one with a thread retires itself).
  void forget_if_unused(const std::shared_ptr<async_line>& line) {
    std::lock_guard lock(mutex_);
    auto it = lines_.find(line->key());
    if (it != lines_.end() && it->second == line && line->idle_without_thread()) lines_.erase(it);
  }

  // Once per wait: a wait found occupied may still become the head when it joins.
  void watch_deadline(const std::shared_ptr<async_wait>& wait) {
    if (wait->deadline == clock::time_point::max()) return;
    bool earliest = false;
    {
      std::lock_guard lock(timer_mutex_);
      if (wait->deadline_entry) return;
      earliest = deadlines_.empty() || wait->deadline < deadlines_.begin()->first;
      wait->deadline_entry = deadlines_.emplace(wait->deadline, wait);
      if (!timer_.joinable()) timer_ = std::jthread([this](std::stop_token stop) { run_timer(stop); });
    }
    if (earliest) timer_wake_.notify_one();
  }

  void run_timer(std::stop_token stop) {
    std::unique_lock lock(timer_mutex_);
    while (!stop.stop_requested()) {
      if (deadlines_.empty()) {
        timer_wake_.wait(lock, stop, [&] { return !deadlines_.empty(); });
        continue;
      }
      const auto first = deadlines_.begin()->first;
      if (clock::now() < first) {
        timer_wake_.wait_until(lock, stop, first,
                               [&] { return deadlines_.empty() || deadlines_.begin()->first < first; });
        continue;
      }
      std::vector<std::shared_ptr<async_wait>> due;
      const auto now = clock::now();
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        if (auto wait = deadlines_.begin()->second.lock()) {
          wait->deadline_entry.reset();
          due.push_back(std::move(wait));
        }
        deadlines_.erase(deadlines_.begin());
      }
      lock.unlock();
      for (auto& wait : due) {
        if (auto line = wait->line.lock()) line->expire(*wait);
      }
      due.clear();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::unordered_map<line_key, std::shared_ptr<async_line>, line_key_hash> lines_;
  std::vector<std::shared_ptr<async_line>> retired_;

  std::mutex timer_mutex_;
  std::condition_variable_any timer_wake_;
  std::multimap<clock::time_point, std::weak_ptr<async_wait>> deadlines_;
  std::jthread timer_;  // stopped and joined before the members it reads

  round_trip_pool round_trips_;  // last: its threads end first at exit
};

engine& the_engine() {
  static engine e;
  return e;
}

void async_line::cancel(async_wait& wait) {
  std::unique_ptr<async_completion> done;
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    if (wait.state == wait_state::at_head) {
      wait.head_stop.request_stop();
      return;
    }
    if (wait.state == wait_state::first_try) {
      // Not begun (the round-trip threads are busy): it ends now, and the next in line leads.
      done = take_unstarted_head(wait);
      queued = !queue_.empty();
    } else if (wait.state == wait_state::queued) {
      done = take_queued(wait);
    } else {
      return;
    }
  }
  if (queued) wake_.notify_one();
  the_engine().forget_deadline(wait);
  done->complete(canceled_error(), lease{});
}

void async_line::finish_head(const std::shared_ptr<async_wait>& head, lease granted, std::error_code ec, bool deliver) {
  the_engine().forget_deadline(*head);
  std::unique_ptr<async_completion> done;
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    head->state = wait_state::done;
    head_ = false;
    done = std::move(head->done);
    queued = !queue_.empty();  // the thread leads the next (it was started when they were queued)
  }
  if (queued) wake_.notify_one();
  if (head->head_stop.stop_requested()) {
    if (granted) {
      std::error_code ignored;
      granted.release(ignored);
    }
    ec = canceled_error();
  } else if (ec == std::errc::operation_canceled) {
    ec = canceled_error();
  }
  if (deliver) done->complete(ec, std::move(granted));
}

void async_line::run(std::stop_token engine_stop) {
  for (;;) {
    std::shared_ptr<async_wait> head;
    {
      std::unique_lock lock(mutex_);
      if (!wake_.wait_for(lock, engine_stop, idle_thread_lifetime,
                          [&] { return handed_ || (!head_ && !queue_.empty()); })) {
        if (engine_stop.stop_requested()) return;
        lock.unlock();
        if (the_engine().retire_if_idle(*this)) return;
        continue;
      }
      if (handed_) {
        head = std::move(handed_);  // at the head already
      } else {
        head = std::move(queue_.front());
        queue_.pop_front();
        head->state = wait_state::at_head;
        head_ = true;
      }
    }
    std::error_code ec;
    lease granted;
    {
      // Engine shutdown ends the head's wait as a cancel would.
      std::stop_callback shutdown(engine_stop, [&head] { head->head_stop.request_stop(); });
      granted = head->acquire(head->deadline, head->head_stop.get_token(), ec);
    }
    finish_head(head, std::move(granted), ec, !engine_stop.stop_requested());
    if (engine_stop.stop_requested()) return;
  }
}

}  // namespace

void async_wait_handle::cancel() const noexcept {
  if (!wait_) return;
  if (auto line = wait_->line.lock()) line->cancel(*wait_);
}

async_wait_handle start_async_wait(line_key key, blocking_acquire acquire, clock::time_point deadline,
                                   std::unique_ptr<async_completion> done) {
  return the_engine().start(key, std::move(acquire), deadline, std::move(done));
}

void start_async_release(lease held, std::unique_ptr<release_completion> done) {
  the_engine().release(std::move(held), std::move(done));
}

std::error_code canceled_error() noexcept { return {ECANCELED, std::system_category()}; }

std::size_t async_engine_threads() noexcept { return the_engine().threads(); }

}  // namespace dlock::detail
