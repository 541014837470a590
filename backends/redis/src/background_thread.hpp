#pragma once
// One background thread per backend for the work no caller should wait for: undoing a grant whose
// reply was lost, and checking the held leases after the server may have restarted. Tasks run one
// after another and get a stop_token that is set when the backend goes away.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

namespace dlock::redis {

class background_thread {
 public:
  using task = std::function<void(std::stop_token)>;

  background_thread() = default;
  ~background_thread() {
    if (thread_.joinable()) {
      thread_.request_stop();
      ready_.notify_all();
      thread_.join();
    }
  }
  background_thread(const background_thread&) = delete;
  background_thread& operator=(const background_thread&) = delete;

  // Sleeps for `d`, or less when `stop` is requested (a task's pause between retries).
  static void pause(std::stop_token stop, std::chrono::milliseconds d) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    cv.wait_for(lock, stop, d, [] { return false; });
  }

  // Never blocks on I/O; the thread starts with the first task.
  void post(task t) noexcept {
    try {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(t));
      if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
    } catch (...) {
      return;  // out of memory: the task is the optional part (grants expire, watchdogs renew)
    }
    ready_.notify_one();
  }

 private:
  void run(std::stop_token stop) {
    for (;;) {
      task next;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, stop, [&] { return !tasks_.empty(); });
        if (stop.stop_requested()) return;
        next = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        next(stop);
      } catch (...) {
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<task> tasks_;
  std::jthread thread_;  // last: stopped and joined before the queue goes
};

}  // namespace dlock::redis
