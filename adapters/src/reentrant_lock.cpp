#include "dlock/reentrant_lock.hpp"

#include <optional>
#include <stop_token>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock {
namespace detail {

// One inner grant shared by the outer leases that hold it.
struct shared_grant {
  std::mutex mutex;
  lease inner;
  unsigned holds = 0;
};

// The wrapper's current grant, if any. Outlives the wrapper while outer leases exist.
struct reentrant_slot {
  mutable std::mutex mutex;
  std::shared_ptr<shared_grant> current;
};

}  // namespace detail

namespace {

lock_options outer_options(const distributed_lock& inner) {
  lock_options o = inner.options();
  o.watchdog = false;  // the inner lock's watchdog renews the one grant that exists
  return o;
}

// One hold of the shared inner grant.
class reentrant_lease final : public spi::lease_state {
 public:
  reentrant_lease(std::shared_ptr<detail::shared_grant> grant, std::shared_ptr<detail::reentrant_slot> slot)
      : lease_state(std::string(grant->inner.name()), grant->inner.state()->ttl(), clock::time_point::max()),
        grant_(std::move(grant)),
        slot_(std::move(slot)),
        inner_state_(grant_->inner.state()),
        on_inner_lost_(inner_state_->lost_token(), lost_forwarder{this}) {}

  std::optional<std::uint64_t> fencing_token() const noexcept override { return inner_state_->fencing_token(); }

 protected:
  void do_release(std::error_code& ec) noexcept override {
    lease last;
    {
      std::lock_guard guard(grant_->mutex);
      if (--grant_->holds > 0) return;
      last = std::move(grant_->inner);
    }
    {
      std::lock_guard guard(slot_->mutex);
      if (slot_->current == grant_) slot_->current.reset();
    }
    last.release(ec);
  }

  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    std::lock_guard guard(grant_->mutex);
    grant_->inner.renew(ttl, ec);
  }

 private:
  struct lost_forwarder {
    reentrant_lease* self;
    void operator()() const noexcept {
      // The inner state, not grant_->inner: the last release may be moving that lease out now.
      auto reason = self->inner_state_->lost_reason();
      self->mark_lost(reason ? reason : make_error_code(errc::lock_lost));
    }
  };

  std::shared_ptr<detail::shared_grant> grant_;
  std::shared_ptr<detail::reentrant_slot> slot_;
  std::shared_ptr<spi::lease_state> inner_state_;  // the inner grant, readable without grant_->mutex
  std::stop_callback<lost_forwarder> on_inner_lost_;
};

}  // namespace

reentrant_lock::reentrant_lock(std::unique_ptr<distributed_lock> inner)
    : distributed_lock(inner ? std::string(inner->name()) : std::string(),
                       inner ? inner->caps().with(capability::reentrant) : capabilities{},
                       inner ? outer_options(*inner) : lock_options{}),
      inner_(std::move(inner)),
      slot_(std::make_shared<detail::reentrant_slot>()) {
  if (!inner_) throw error(errc::invalid_argument, "reentrant_lock needs a lock, got a null unique_ptr");
}

reentrant_lock::~reentrant_lock() = default;

unsigned reentrant_lock::hold_count() const noexcept {
  std::shared_ptr<detail::shared_grant> g;
  {
    std::lock_guard guard(slot_->mutex);
    g = slot_->current;
  }
  if (!g) return 0;
  std::lock_guard guard(g->mutex);
  return g->holds;
}

// A live grant of this wrapper gets one more hold; nullptr when there is none (or it was lost).
std::unique_ptr<spi::lease_state> reentrant_lock::join_current_grant() noexcept {
  std::shared_ptr<detail::shared_grant> g;
  {
    std::lock_guard guard(slot_->mutex);
    g = slot_->current;
  }
  if (!g) return nullptr;
  {
    std::lock_guard guard(g->mutex);
    if (g->holds == 0 || !g->inner.held()) return nullptr;
    ++g->holds;
  }
  try {
    return std::make_unique<reentrant_lease>(g, slot_);
  } catch (...) {
    std::lock_guard guard(g->mutex);
    --g->holds;
    return nullptr;
  }
}

std::unique_ptr<spi::lease_state> reentrant_lock::publish(lease inner_grant) noexcept {
  try {
    auto g = std::make_shared<detail::shared_grant>();
    g->inner = std::move(inner_grant);
    g->holds = 1;
    {
      std::lock_guard guard(slot_->mutex);
      slot_->current = g;
    }
    return std::make_unique<reentrant_lease>(std::move(g), slot_);
  } catch (...) {
    return nullptr;  // the inner lease (moved into g or still in inner_grant) releases itself
  }
}

std::unique_ptr<spi::lease_state> reentrant_lock::do_try_acquire(std::error_code& ec) noexcept {
  if (auto joined = join_current_grant()) return joined;
  std::unique_lock acquiring(acquiring_, std::try_to_lock);
  if (!acquiring) return nullptr;  // another thread of this owner is taking the grant right now
  if (auto joined = join_current_grant()) return joined;
  lease l = inner_->try_acquire(ec);
  if (!l) return nullptr;
  return publish(std::move(l));
}

std::unique_ptr<spi::lease_state> reentrant_lock::do_acquire_until(clock::time_point deadline,
                                                                   std::error_code& ec) noexcept {
  if (auto joined = join_current_grant()) return joined;
  // Another thread of this owner taking the grant: wait for it, then join its grant.
  std::unique_lock acquiring(acquiring_, std::defer_lock);
  if (deadline == clock::time_point::max()) {
    acquiring.lock();
  } else if (!acquiring.try_lock_until(deadline)) {
    return nullptr;
  }
  if (auto joined = join_current_grant()) return joined;
  lease l = inner_->try_acquire_until(deadline, ec);
  if (!l) return nullptr;
  return publish(std::move(l));
}

}  // namespace dlock
