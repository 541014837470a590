#include "detached_threads.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "connection.hpp"

namespace dlock::mysql {

namespace {

class detached_threads {
 public:
  static detached_threads& instance() {
    // The driver first: a static constructed before this one is destroyed after it.
    (void)loaded_driver();
    static detached_threads threads;
    return threads;
  }

  void start(std::function<void()> work) {
    {
      const std::lock_guard lock(mutex_);
      ++running_;
    }
    try {
      std::thread([this, work = std::move(work)] {
        try {
          work();
        } catch (...) {  // a detached thread has no one to tell
        }
        const std::lock_guard lock(mutex_);
        --running_;
        ended_.notify_all();  // under the lock: the waiting destructor cannot return before it
      }).detach();
    } catch (...) {
      const std::lock_guard lock(mutex_);
      --running_;
      throw;
    }
  }

  ~detached_threads() {
    std::unique_lock lock(mutex_);
    ended_.wait_for(lock, std::chrono::seconds(10), [&] { return running_ == 0; });
  }

 private:
  detached_threads() = default;
  std::mutex mutex_;
  std::condition_variable ended_;
  int running_ = 0;
};

}  // namespace

void start_detached(std::function<void()> work) { detached_threads::instance().start(std::move(work)); }

}  // namespace dlock::mysql
