// The pool of connections to one server: idle connections reused, a bounded number open, waits
// for a free one that end at the caller's deadline or stop request (connection.hpp).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>

#include "connection.hpp"
#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::redis {

pool::pool(endpoint where, std::size_t max_size, opener open)
    : where_(std::move(where)), max_size_(max_size ? max_size : 1), open_(std::move(open)) {}

pool::handle::~handle() {
  if (owner_ && c_) owner_->give_back(std::move(c_));
}

pool::handle& pool::handle::operator=(handle&& other) noexcept {
  if (this != &other) {
    if (owner_ && c_) owner_->give_back(std::move(c_));
    owner_ = std::move(other.owner_);
    c_ = std::move(other.c_);
  }
  return *this;
}

pool::handle pool::checkout(std::error_code& ec) noexcept {
  return checkout(std::chrono::steady_clock::now() + where_.connect_timeout, ec);
}

pool::handle pool::checkout(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
  try {
    std::unique_lock lock(mutex_);
    bool closed_found = false;
    if (waiting_.empty()) {
      while (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        if (!c->closed_by_server()) {
          lock.unlock();
          if (closed_found) server_changed();
          return handle(shared_from_this(), std::move(c));
        }
        --open_count_;  // dropped; the server restarted or closed it
        closed_found = true;
      }
      if (open_count_ < max_size_) {
        ++open_count_;
        lock.unlock();
        return open_new(closed_found, ec);
      }
    }
    // Full, or others were first: wait in line, FIFO, until served, the caller's deadline or its
    // acquire's stop request.
    waiter me;
    waiting_.push_back(&me);
    // Registered with mutex_ let go (a stop already requested runs the callback here); ended before
    // `me` goes, and never while mutex_ is held (every return below lets it go first).
    struct wake_at_stop {
      pool* p;
      waiter* w;
      void operator()() const noexcept {
        std::lock_guard held(p->mutex_);
        w->stopped = true;
        w->served_cv.notify_all();
      }
    };
    std::optional<std::stop_callback<wake_at_stop>> on_stop;
    if (abandoned_at_stop()) {
      lock.unlock();
      on_stop.emplace(spi::current_stop_token(), wake_at_stop{this, &me});
      lock.lock();
    }
    const bool forever = deadline == std::chrono::steady_clock::time_point::max();
    while (!me.served && !me.stopped) {
      if (forever)
        me.served_cv.wait(lock);
      else if (me.served_cv.wait_until(lock, deadline) == std::cv_status::timeout)
        break;
    }
    if (!me.served) {
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
      const bool stopped = me.stopped;
      lock.unlock();
      if (closed_found) server_changed();
      if (stopped)
        set_error(ec, errc::backend_unavailable,
                  "redis " + where_.label() + ": the wait for a pooled connection was abandoned at a stop request");
      else
        set_error(ec, errc::backend_unavailable,
                  "redis " + where_.label() + ": all " + std::to_string(max_size_) +
                      " pooled connections (pool_size) stayed busy until the caller's deadline (connect_timeout " +
                      std::to_string(where_.connect_timeout.count()) + "ms for a call without one); raise pool_size");
      return {};
    }
    auto c = std::move(me.given);
    lock.unlock();
    if (c && !c->closed_by_server()) {
      if (closed_found) server_changed();
      return handle(shared_from_this(), std::move(c));
    }
    // Served with room to open one, or with a connection the server has closed: its slot is ours.
    closed_found = closed_found || c != nullptr;
    c.reset();
    return open_new(closed_found, ec);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis " + where_.label() + ": out of memory");
    return {};
  }
}

pool::handle pool::open_new(bool closed_found, std::error_code& ec) noexcept {
  if (closed_found) server_changed();
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mutex_);
    generation = generation_;
  }
  auto c = open_ ? open_(where_, ec) : connection::open(where_, ec);
  if (c) c->generation_ = generation;
  if (!c) {
    std::lock_guard lock(mutex_);
    --open_count_;
    serve_next_locked(nullptr);
    return {};
  }
  note_run_id(c->run_id());
  return handle(shared_from_this(), std::move(c));
}

void pool::serve_next_locked(std::unique_ptr<connection> c) noexcept {
  if (waiting_.empty() || (!c && open_count_ >= max_size_)) {
    if (c) {
      try {
        idle_.push_back(std::move(c));
      } catch (...) {
        --open_count_;
      }
    }
    return;
  }
  if (!c) ++open_count_;  // the room freed is the waiter's
  auto* next = waiting_.front();
  waiting_.pop_front();
  next->given = std::move(c);
  next->served = true;
  next->served_cv.notify_one();  // under the mutex: `next` lives on its waiter's stack
}

void pool::give_back(std::unique_ptr<connection> c) noexcept {
  bool dropped = false;
  {
    std::lock_guard lock(mutex_);
    if (c->broken() || c->unanswered() > 0 || c->generation_ != generation_) {
      --open_count_;  // dropped (a late reply would answer the next command): the next checkout reconnects
      dropped = c->broken() && !c->timed_out();
      serve_next_locked(nullptr);
    } else {
      serve_next_locked(std::move(c));
    }
  }
  c.reset();
  if (dropped) server_changed();
}

void pool::on_server_change(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void pool::retire_all() noexcept {
  std::vector<std::unique_ptr<connection>> closing;
  {
    std::lock_guard lock(mutex_);
    ++generation_;
    open_count_ -= idle_.size();
    closing.swap(idle_);
    while (!waiting_.empty() && open_count_ < max_size_) serve_next_locked(nullptr);
  }
  closing.clear();  // closed outside the lock
  server_changed();
}

void pool::server_changed() noexcept {
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    listener = listener_;
  }
  if (listener) listener();
}

void pool::note_run_id(const std::string& run_id) noexcept {
  if (run_id.empty()) return;
  bool changed = false;
  {
    std::lock_guard lock(mutex_);
    changed = !last_run_id_.empty() && last_run_id_ != run_id;
    try {
      last_run_id_ = run_id;
    } catch (...) {
    }
  }
  if (changed) server_changed();
}

}  // namespace dlock::redis
