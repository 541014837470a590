#include "dlock/multi_lock.hpp"

#include <algorithm>
#include <mutex>

#include "dlock/diagnostics.hpp"
#include "dlock/error.hpp"
#include "dlock/lease_state.hpp"
#include "or_throw.hpp"

namespace dlock {

// Heap-allocated so that the members' lost callbacks can point at it while the multi_lease moves.
struct multi_lease::grant {
  // Forwards one member's loss to the set.
  struct on_member_lost {
    grant* set;
    const lease* member;
    void operator()() const noexcept { set->mark_lost(*member); }
  };

  explicit grant(std::vector<lease> taken) : members(std::move(taken)) {
    watches.reserve(members.size());
    for (const auto& m : members)
      watches.push_back(std::make_unique<std::stop_callback<on_member_lost>>(m.lost_token(), on_member_lost{this, &m}));
  }

  void mark_lost(const lease& member) noexcept {
    {
      const std::lock_guard guard(mutex);
      if (lost.stop_requested()) return;
      reason = member.lost_reason();
      try {
        lost_name = std::string(member.name());
      } catch (...) {
      }
    }
    lost.request_stop();
  }

  // Before any member is released: a release that finds a member gone marks that member lost,
  // which is the release's failure to report, not a loss of a set no longer held.
  void stop_watching() noexcept { watches.clear(); }

  std::vector<lease> members;
  std::stop_source lost;
  mutable std::mutex mutex;
  std::error_code reason;
  std::string lost_name;
  // Last: destroyed first, so no callback runs on a grant being torn down.
  std::vector<std::unique_ptr<std::stop_callback<on_member_lost>>> watches;
};

multi_lease::multi_lease() noexcept = default;

multi_lease::multi_lease(std::vector<lease> members) {
  if (!members.empty()) grant_ = std::make_unique<grant>(std::move(members));
}

multi_lease::multi_lease(multi_lease&&) noexcept = default;

multi_lease& multi_lease::operator=(multi_lease&& other) noexcept {
  if (this != &other) {
    multi_lease dying(std::move(*this));  // released by its destructor, with the same reporting
    grant_ = std::move(other.grant_);
  }
  return *this;
}

multi_lease::~multi_lease() {
  if (!grant_) return;
  std::error_code ec;
  release(ec);
  if (ec) report_background_error(ec, "releasing a set of locks when its lease was destroyed: " + last_error_message());
}

bool multi_lease::held() const noexcept {
  if (!grant_ || grant_->lost.stop_requested()) return false;
  return std::all_of(grant_->members.begin(), grant_->members.end(), [](const lease& m) { return m.held(); });
}

std::span<const lease> multi_lease::members() const noexcept {
  if (!grant_) return {};
  return grant_->members;
}

const lease* multi_lease::member(std::string_view name) const noexcept {
  for (const auto& m : members())
    if (m.name() == name) return &m;
  return nullptr;
}

std::optional<std::uint64_t> multi_lease::fencing_token(std::string_view name) const noexcept {
  const auto* m = member(name);
  return m ? m->fencing_token() : std::nullopt;
}

multi_lease::clock::time_point multi_lease::valid_until() const noexcept {
  if (!grant_) return clock::time_point::min();
  auto earliest = clock::time_point::max();
  for (const auto& m : grant_->members) earliest = std::min(earliest, m.valid_until());
  return earliest;
}

std::chrono::milliseconds multi_lease::remaining() const noexcept {
  if (!grant_) return std::chrono::milliseconds::zero();
  auto least = std::chrono::milliseconds::max();
  for (const auto& m : grant_->members) least = std::min(least, m.remaining());
  return least;
}

std::stop_token multi_lease::lost_token() const noexcept {
  return grant_ ? grant_->lost.get_token() : std::stop_token();
}

std::error_code multi_lease::lost_reason() const noexcept {
  if (!grant_) return {};
  const std::lock_guard guard(grant_->mutex);
  return grant_->reason;
}

std::string multi_lease::lost_member() const {
  if (!grant_) return {};
  const std::lock_guard guard(grant_->mutex);
  return grant_->lost_name;
}

void multi_lease::renew() {
  detail::or_throw([&](std::error_code& ec) { renew(ec); });
}

void multi_lease::renew(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!grant_) {
    set_error(ec, errc::invalid_argument, "renew on an empty set of locks");
    return;
  }
  std::error_code first;
  std::string message;
  for (auto& m : grant_->members) {
    std::error_code e;
    m.renew(m.state() ? m.state()->ttl() : std::chrono::milliseconds(1), e);
    if (e && !first) {
      first = e;
      message = last_error_message();
    }
  }
  if (first) set_error(ec, first, std::move(message));
}

void multi_lease::release() {
  detail::or_throw([&](std::error_code& ec) { release(ec); });
}

void multi_lease::release(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!grant_) return;
  grant_->stop_watching();
  std::error_code first;
  std::string message;
  auto& members = grant_->members;
  for (std::size_t i = members.size(); i-- > 0;) {  // last taken, first released
    std::error_code e;
    members[i].release(e);
    if (e && !first) {
      first = e;
      message = last_error_message();
    }
  }
  if (first) set_error(ec, first, std::move(message));
}

multi_lock::multi_lock(std::vector<std::unique_ptr<distributed_lock>> members) : members_(std::move(members)) {
  names_.reserve(members_.size());
  for (const auto& m : members_) names_.emplace_back(m->name());
}

multi_lock::~multi_lock() = default;

capabilities multi_lock::caps() const noexcept { return members_.front()->caps(); }

const lock_options& multi_lock::options() const noexcept { return members_.front()->options(); }

namespace {

// Releases what was taken, last first. The caller has saved any message it reports.
void give_back(std::vector<lease>& taken) noexcept {
  for (std::size_t i = taken.size(); i-- > 0;) {
    std::error_code e;
    taken[i].release(e);
    if (e)
      report_background_error(e, "giving back lock '" + std::string(taken[i].name()) +
                                     "' of a set not fully taken: " + last_error_message());
  }
  taken.clear();
}

}  // namespace

multi_lease multi_lock::take(mode how, clock::time_point deadline, const std::stop_token& stop,
                             std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  try {
    // Asked of every backend: one without capability::atomic_set may still take some sets in one
    // step (redis+cluster://, when every key shares a slot).
    if (!stop.stop_requested()) {
      multi_lease whole;
      switch (take_in_one_step(whole, ec)) {
        case one_step::taken:
          if (!stop.stop_requested()) return whole;
          whole.release(ec);  // a stop that came meanwhile: nobody worked under it
          set_error(ec, std::make_error_code(std::errc::operation_canceled), "the wait for a set of locks was stopped");
          return {};
        case one_step::failed: return {};
        case one_step::held:
          if (how == mode::once) return {};
          break;  // wait for the members in canonical order
        case one_step::not_taken: break;
      }
    }
    for (;;) {
      std::vector<lease> taken;
      taken.reserve(members_.size());
      // Every caller takes the names in the same (byte) order: a caller waiting for a name holds
      // only names before it, and whoever holds that name never waits for one of them.
      for (const auto& m : members_) {
        std::error_code e;
        lease got;
        switch (how) {
          case mode::once: got = m->try_acquire(e); break;
          case mode::until: got = m->try_acquire_until(deadline, stop, e); break;  // the rest of the one deadline
          case mode::forever: got = m->acquire(stop, e); break;
        }
        if (e) {
          const std::string message = "lock '" + std::string(m->name()) + "' of a set of " +
                                      std::to_string(members_.size()) + ": " + last_error_message();
          give_back(taken);
          set_error(ec, e, message);
          return {};
        }
        if (!got) {
          give_back(taken);
          return {};
        }
        taken.push_back(std::move(got));
      }
      // A member taken early may have run out of validity while a later one was waited for
      // (its server unreachable for a whole ttl): such a set is not held; start again.
      if (std::all_of(taken.begin(), taken.end(), [](const lease& l) { return l.held(); }))
        return multi_lease(std::move(taken));
      give_back(taken);
      if (how == mode::once || (how == mode::until && clock::now() >= deadline)) return {};
      if (stop.stop_requested()) {
        set_error(ec, std::make_error_code(std::errc::operation_canceled), "the wait for a set of locks was stopped");
        return {};
      }
    }
  } catch (const std::exception& x) {
    set_error(ec, errc::backend_error, std::string("taking a set of locks: ") + x.what());
    return {};
  }
}

multi_lock::one_step multi_lock::take_in_one_step(multi_lease& whole, std::error_code& ec) {
  // A try must not overtake this process's waiters for a member: the member-by-member path answers.
  if (std::any_of(members_.begin(), members_.end(), [](const auto& m) { return m->must_wait_in_line(); }))
    return one_step::not_taken;
  std::vector<distributed_lock*> set;
  set.reserve(members_.size());
  for (const auto& m : members_) set.push_back(m.get());
  std::error_code e;
  auto states = members_.front()->do_try_acquire_set(set, e);
  if (e == make_error_code(errc::not_supported) || e == make_error_code(errc::backend_unavailable)) {
    clear_last_error_message();  // taken member by member, which waits out an outage as a single lock does
    return one_step::not_taken;
  }
  if (e) {
    set_error(ec, e, "a set of " + std::to_string(members_.size()) + " locks in one step: " + last_error_message());
    return one_step::failed;
  }
  if (states.empty()) return one_step::held;
  const auto now = clock::now();
  if (states.size() != members_.size() ||
      !std::all_of(states.begin(), states.end(), [&](const auto& s) { return s && s->valid_until() > now; })) {
    // Granted without validity left (the server stalled while replying): nobody may use it.
    for (auto& s : states) {
      std::error_code ignored;
      if (s) s->release(ignored);
    }
    return one_step::not_taken;
  }
  std::vector<lease> taken;
  taken.reserve(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) {
    taken.push_back(members_[i]->adopt_set_member(std::move(states[i])));
    if (!taken.back()) {  // its watchdog could not start (it gave the member back)
      taken.pop_back();
      give_back(taken);
      for (std::size_t j = i + 1; j < states.size(); ++j) {
        std::error_code ignored;
        states[j]->release(ignored);
      }
      return one_step::not_taken;
    }
  }
  whole = multi_lease(std::move(taken));
  return one_step::taken;
}

multi_lease multi_lock::try_acquire() {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire(ec); });
}

multi_lease multi_lock::try_acquire(std::error_code& ec) noexcept {
  return take(mode::once, clock::now(), std::stop_token{}, ec);
}

multi_lease multi_lock::try_acquire_until(clock::time_point deadline) {
  return try_acquire_until(deadline, std::stop_token{});
}

multi_lease multi_lock::try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
  return try_acquire_until(deadline, std::stop_token{}, ec);
}

multi_lease multi_lock::try_acquire_until(clock::time_point deadline, std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return try_acquire_until(deadline, std::move(stop), ec); });
}

multi_lease multi_lock::try_acquire_until(clock::time_point deadline, std::stop_token stop,
                                          std::error_code& ec) noexcept {
  return take(mode::until, deadline, stop, ec);
}

multi_lease multi_lock::acquire() { return acquire(std::stop_token{}); }

multi_lease multi_lock::acquire(std::error_code& ec) noexcept { return acquire(std::stop_token{}, ec); }

multi_lease multi_lock::acquire(std::stop_token stop) {
  return detail::or_throw([&](std::error_code& ec) { return acquire(std::move(stop), ec); });
}

multi_lease multi_lock::acquire(std::stop_token stop, std::error_code& ec) noexcept {
  auto l = take(mode::forever, clock::time_point::max(), stop, ec);
  if (!l && !ec) set_error(ec, errc::timeout, "a set of locks: the backend gave up waiting");
  return l;
}

}  // namespace dlock
