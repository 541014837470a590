#include "watchdog.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dlock/diagnostics.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum class event { renew, check_validity };
struct watched;
using timer_map = std::multimap<clock::time_point, std::pair<event, std::shared_ptr<watched>>>;

struct watched {
  std::weak_ptr<spi::lease_state> state;
  const spi::lease_state* key = nullptr;  // its entry in by_lease_
  std::optional<milliseconds> renew_every;
  std::vector<timer_map::iterator> pending;  // this lease's entries in timers_ (under the mutex)
};

class watchdog {
 public:
  static watchdog& instance() {
    static watchdog w;
    return w;
  }

  void watch(const std::shared_ptr<spi::lease_state>& s, std::optional<milliseconds> renew_every) {
    auto w = std::make_shared<watched>(watched{s, s.get(), renew_every, {}});
    std::lock_guard guard(mutex_);
    start_locked();
    by_lease_[s.get()] = w;
    if (renew_every) schedule_locked(clock::now() + *renew_every, event::renew, w);
    if (s->valid_until() != clock::time_point::max()) schedule_locked(s->valid_until(), event::check_validity, w);
  }

  // A released lease needs no timer: drop its entries now rather than when they fall due (a
  // validity timer is as long as the ttl; at thousands of grants per second they would pile up).
  void forget(const spi::lease_state* s) {
    std::lock_guard guard(mutex_);
    const auto it = by_lease_.find(s);
    if (it == by_lease_.end()) return;
    for (const auto& timer : it->second->pending) timers_.erase(timer);
    it->second->pending.clear();
    by_lease_.erase(it);
  }

  watchdog_load load() {
    std::lock_guard guard(mutex_);
    return {by_lease_.size(), timers_.size(), renewed_, renewal_calls_};
  }

  ~watchdog() {
    {
      std::lock_guard guard(mutex_);
      stopping_ = true;
    }
    timer_cv_.notify_all();
    renewer_cv_.notify_all();
    if (timer_.joinable()) timer_.join();
    if (renewer_.joinable()) renewer_.join();
  }

 private:
  void start_locked() {
    if (timer_.joinable()) return;
    timer_ = std::thread([this] { run_timer(); });
    renewer_ = std::thread([this] { run_renewals(); });
  }

  void schedule_locked(clock::time_point at, event e, std::shared_ptr<watched> w) {
    auto& pending = w->pending;
    pending.push_back(timers_.emplace(at, timer_map::mapped_type{e, std::move(w)}));
    // Wake the timer thread only if it would otherwise sleep past this entry: a grant does not
    // cost a context switch (on a busy client that is most of the watchdog's cost).
    if (at < wake_at_) timer_cv_.notify_one();
  }

  void run_timer() {
    std::unique_lock lock(mutex_);
    bool lingered = false;
    while (!stopping_) {
      if (timers_.empty()) {
        // Grant, release, grant...: each release empties the map and each grant would have to
        // wake a thread that sleeps until notified. So linger a second with a deadline (a grant
        // due later than that needs no notification), and only then sleep until notified.
        if (lingered) {
          wake_at_ = clock::time_point::max();
          timer_cv_.wait(lock);
        } else {
          wake_at_ = clock::now() + std::chrono::seconds{1};
          timer_cv_.wait_until(lock, wake_at_);
        }
        lingered = !lingered && timers_.empty();
        continue;
      }
      lingered = false;
      const auto due = timers_.begin()->first;
      if (clock::now() < due) {
        wake_at_ = due;
        timer_cv_.wait_until(lock, due);
        continue;
      }
      wake_at_ = clock::time_point::min();  // awake: it reads the map again before it sleeps
      auto [kind, w] = timers_.begin()->second;
      std::erase(w->pending, timers_.begin());
      timers_.erase(timers_.begin());
      auto s = w->state.lock();
      if (!s || s->released() || s->lost()) {  // done with this lease
        if (w->pending.empty()) forget_locked(w);
        continue;
      }
      if (kind == event::renew) {
        renewals_.push_back(std::move(w));
        take_renewals_due_soon_locked();
        renewer_cv_.notify_one();
      } else if (clock::now() >= s->valid_until()) {
        lock.unlock();
        expire(*s);
        lock.lock();
      } else {
        schedule_locked(s->valid_until(), event::check_validity, std::move(w));  // renewed since
      }
    }
  }

  // Renewals due within a short window go with the one due now: a little early (at most a tenth
  // of their period), so that leases taken about together are renewed together, in one batch,
  // instead of each on its own as it falls due.
  void take_renewals_due_soon_locked() {
    constexpr milliseconds window{50};
    const auto now = clock::now();
    for (auto it = timers_.begin(); it != timers_.end() && it->first <= now + window;) {
      auto& [kind, w] = it->second;
      if (kind != event::renew || !w->renew_every || it->first > now + *w->renew_every / 10) {
        ++it;
        continue;
      }
      auto taken = std::move(w);
      std::erase(taken->pending, it);
      it = timers_.erase(it);
      renewals_.push_back(std::move(taken));
    }
  }

  // The deadline passed with no successful renewal: the server may hand the lock to someone else
  // now, so the holder must stop. Reported, never silent.
  static void expire(spi::lease_state& s) {
    if (s.released() || s.lost()) return;
    s.mark_lost(make_error_code(errc::lock_lost));
    report_background_error(make_error_code(errc::lock_lost),
                            "lease on lock '" + s.name() + "' lost: its validity ran out without a successful renewal");
  }

  void run_renewals() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (renewals_.empty()) {
        renewer_cv_.wait(lock);
        continue;
      }
      // Every renewal due by now, in one go: the leases of one batch are sent together.
      std::vector<std::shared_ptr<watched>> due(std::make_move_iterator(renewals_.begin()),
                                                std::make_move_iterator(renewals_.end()));
      renewals_.clear();
      lock.unlock();
      const auto next = renew_due(due);
      lock.lock();
      for (std::size_t i = 0; i < due.size(); ++i)
        if (next[i]) schedule_locked(*next[i], event::renew, std::move(due[i]));
    }
  }

  // Renews `due`; returns, for each, when to renew next (nullopt: no more renewals).
  std::vector<std::optional<clock::time_point>> renew_due(const std::vector<std::shared_ptr<watched>>& due) {
    std::vector<std::optional<clock::time_point>> next(due.size());
    std::vector<std::shared_ptr<spi::lease_state>> states(due.size());
    std::map<spi::renewal_batch*, std::vector<std::size_t>> batches;
    for (std::size_t i = 0; i < due.size(); ++i) {
      states[i] = due[i]->state.lock();
      const auto& s = states[i];
      if (!s || s->released() || s->lost()) continue;
      if (auto* batch = s->batch()) {
        batches[batch].push_back(i);
        continue;
      }
      std::error_code ec;
      s->renew(s->ttl(), ec);
      count_renewals(1);
      next[i] = after_renewal(*s, *due[i], ec, last_error_message());
    }
    for (auto& [batch, members] : batches) {
      // A bounded batch, so one pipeline's replies do not delay the next batch's leases by much.
      constexpr std::size_t most_at_once = 512;
      for (std::size_t from = 0; from < members.size(); from += most_at_once) {
        const auto count = std::min(most_at_once, members.size() - from);
        std::vector<spi::lease_state*> leases(count);
        std::vector<std::error_code> outcomes(count);
        for (std::size_t k = 0; k < count; ++k) leases[k] = states[members[from + k]].get();
        if (const auto sent = spi::lease_state::renew_together(*batch, leases, outcomes); sent > 0)
          count_renewals(sent);
        for (std::size_t k = 0; k < count; ++k) {
          const auto i = members[from + k];
          // The thread's last error message is the last lease's: each says its own code.
          next[i] = after_renewal(*states[i], *due[i], outcomes[k], outcomes[k].message());
        }
      }
    }
    return next;
  }

  void count_renewals(std::size_t leases) {
    std::lock_guard guard(mutex_);
    renewed_ += leases;
    ++renewal_calls_;
  }

  // When to renew next after a renewal that gave `ec`, or nullopt when the lease needs no more.
  static std::optional<clock::time_point> after_renewal(spi::lease_state& s, const watched& w, std::error_code ec,
                                                        const std::string& why) {
    if (!ec) return clock::now() + *w.renew_every;
    if (s.lost() || s.released()) {
      if (!s.released()) report_background_error(ec, "lease on lock '" + s.name() + "' lost: renewal failed: " + why);
      return std::nullopt;
    }
    // A transient failure (server unreachable): try again soon; the validity check fires the
    // lost signal if no renewal succeeds before the deadline.
    report_background_error(ec, "renewing lock '" + s.name() + "' failed, retrying: " + why);
    return clock::now() + std::max(milliseconds(20), *w.renew_every / 4);
  }

  std::mutex mutex_;
  std::condition_variable timer_cv_, renewer_cv_;
  void forget_locked(const std::shared_ptr<watched>& w) {
    // The address may meanwhile belong to a newer lease: erase only our own entry.
    if (const auto it = by_lease_.find(w->key); it != by_lease_.end() && it->second == w) by_lease_.erase(it);
  }

  timer_map timers_;
  // When the timer thread wakes up by itself (max: only when notified; min: it is awake).
  clock::time_point wake_at_ = clock::time_point::max();
  // Keyed by address, only while the lease is watched: forget() on release, or when its last
  // timer finds it gone. A renewal in flight keeps its own reference.
  std::unordered_map<const spi::lease_state*, std::shared_ptr<watched>> by_lease_;
  std::deque<std::shared_ptr<watched>> renewals_;
  std::uint64_t renewed_ = 0, renewal_calls_ = 0;  // leases renewed; calls to renew or renew_all
  bool stopping_ = false;
  std::thread timer_, renewer_;
};

}  // namespace

void watch_lease(const std::shared_ptr<spi::lease_state>& state, std::optional<milliseconds> renew_every) {
  watchdog::instance().watch(state, renew_every);
}

void forget_lease(const spi::lease_state& state) { watchdog::instance().forget(&state); }

}  // namespace dlock::detail

namespace dlock {

watchdog_load current_watchdog_load() noexcept { return detail::watchdog::instance().load(); }

}  // namespace dlock
