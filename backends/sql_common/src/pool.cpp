// The bounded connection pool. Connecting happens outside the mutex. When full (max_connections
// out, or for a lease max_dedicated held by leases) a checkout waits for a connection to come back
// and gives up at checkout_timeout with backend_unavailable stating the bound it hit.
#include "dlock_sql/pool.hpp"

#include <string>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock_sql/deadline.hpp"

namespace dlock::sql {

std::shared_ptr<pool> pool::make(connector connect, pool_options options) {
  return std::shared_ptr<pool>(new pool(std::move(connect), options));
}

pool::pool(connector connect, pool_options options) : connect_(std::move(connect)), options_(options) {}
pool::~pool() = default;

namespace {
std::chrono::steady_clock::time_point after(std::chrono::milliseconds wait) {
  return std::chrono::steady_clock::now() + wait;
}
}  // namespace

pool::handle pool::checkout(std::error_code& ec) noexcept {
  return checkout_impl(false, after(options_.checkout_timeout), ec);
}
pool::handle pool::checkout_dedicated(std::error_code& ec) noexcept {
  return checkout_impl(true, after(options_.checkout_timeout), ec);
}
pool::handle pool::checkout_dedicated(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
  return checkout_impl(true, deadline, ec);
}

pool::handle pool::checkout_impl(bool dedicated, std::chrono::steady_clock::time_point deadline,
                                 std::error_code& ec) noexcept {
  // Inside an acquire with a deadline (deadline.hpp), neither waiting nor connecting outlasts it.
  const auto io = io_deadline();
  deadline = std::min(deadline, io);
  std::unique_lock lk(mutex_);
  for (;;) {
    const bool dedicated_full = dedicated && dedicated_ >= options_.max_dedicated;
    while (!dedicated_full && !idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      // An idle connection the server closed meanwhile (restart, pg_terminate_backend, KILL,
      // idle timeout) is dropped here instead of failing the caller's first statement.
      if (!c->usable() || !c->poll_alive()) {
        --open_;
        continue;
      }
      if (dedicated) ++dedicated_;
      return handle(shared_from_this(), std::move(c), dedicated);
    }
    if (!dedicated_full && open_ < options_.max_connections) {
      ++open_;
      if (dedicated) ++dedicated_;
      lk.unlock();
      std::unique_ptr<connection> c;
      auto timeout = options_.connect_timeout;
      if (io != std::chrono::steady_clock::time_point::max())
        timeout =
            std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(io - std::chrono::steady_clock::now()));
      try {
        if (timeout.count() > 0)
          c = connect_(timeout, ec);
        else
          set_error(ec, errc::backend_unavailable, "the caller's deadline passed before a connection could be opened");
      } catch (...) {
        set_error(ec, errc::backend_error, "connecting threw an unexpected exception");
      }
      if (!c) {
        lk.lock();
        --open_;
        if (dedicated) --dedicated_;
        ++returns_;
        returned_.notify_all();
        if (!ec) set_error(ec, errc::backend_unavailable, "could not connect");
        return {};
      }
      return handle(shared_from_this(), std::move(c), dedicated);
    }
    // Full: wait for a connection (or, for a lease, a lease's connection) to come back.
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string waited =
          " within the caller's deadline (checkout_timeout=" + std::to_string(options_.checkout_timeout.count()) +
          "ms for calls without one)";
      if (dedicated_full)
        set_error(ec, errc::backend_unavailable,
                  "every connection a lease may hold stayed in use" + waited + " (max_dedicated=" +
                      std::to_string(options_.max_dedicated) + "); release leases or raise max_dedicated");
      else
        set_error(ec, errc::backend_unavailable,
                  "no connection came back" + waited +
                      " (all max_connections=" + std::to_string(options_.max_connections) + " are in use)");
      return {};
    }
    const auto returns_seen = returns_;
    ++waiting_;
    const bool returned = spi::wait_until(returned_, lk, deadline, [&] { return returns_ != returns_seen; });
    --waiting_;
    if (!returned && spi::stop_requested()) {
      // The caller's acquire was asked to stop: it ends here as at its deadline (the core answers
      // operation_canceled).
      set_error(ec, errc::backend_unavailable, "the wait for a connection was stopped");
      return {};
    }
  }
}

void pool::give_back(std::unique_ptr<connection> c, bool dedicated) noexcept {
  std::unique_ptr<connection> to_close;
  {
    std::lock_guard lk(mutex_);
    if (dedicated) --dedicated_;
    ++returns_;
    if (c && c->usable() && idle_.size() < options_.max_idle) {
      try {
        idle_.push_back(std::move(c));
      } catch (...) {
        to_close = std::move(c);
        --open_;
      }
    } else {
      to_close = std::move(c);
      --open_;
    }
  }
  returned_.notify_all();  // waiters for any connection and waiters for a lease's connection
  // to_close is destroyed outside the mutex (closing may do I/O).
}

pool::handle& pool::handle::operator=(handle&& other) noexcept {
  if (this != &other) {
    give_back();
    owner_ = std::move(other.owner_);
    conn_ = std::move(other.conn_);
    dedicated_ = other.dedicated_;
  }
  return *this;
}

pool::handle::~handle() { give_back(); }

void pool::handle::give_back() noexcept {
  if (owner_) owner_->give_back(std::move(conn_), dedicated_);
  owner_.reset();
  conn_.reset();
}

bool pool::handle::pool_has_waiters() const noexcept { return owner_ && owner_->waiting_.load() > 0; }

void pool::handle::discard() noexcept {
  conn_.reset();  // closes now; give_back counts it as closed
  give_back();
}

}  // namespace dlock::sql
