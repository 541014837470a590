// The unique-index strategy (make_index_backend): a row per held lock, inserted or taken over
// when expired in one statement; reentrant through owner + hold count; with fair=true a waiters
// table grants in arrival order.
#include <algorithm>
#include <span>
#include <thread>

#include "dlock/acquire_stop.hpp"
#include "dlock_sql/deadline.hpp"
#include "strategy_common.hpp"
#include "units_strategy.hpp"

namespace dlock::sql {
using namespace detail;
namespace {

// The index strategy's statements are whole transactions of their own: safe to re-run.
constexpr int index_attempts = 5;

// The index_lock whose waiting acquire runs on this thread, and whether one of its attempts marked
// the name's reader-writer lock (index_lock::do_try_acquire).
thread_local const void* waiting_lock = nullptr;
thread_local bool marked_while_waiting = false;
// The fair index_lock whose acquire on this thread has joined the waiters table.
thread_local const void* queued_lock = nullptr;

// The watchdog's batches (spi::renewal_batch) of one backend: the leases due together are renewed
// with one statement per ttl and 512 leases, on one connection (strategy_common: renew_together).
struct index_state : shared_state, spi::renewal_batch {
  index_sql sql;
  std::optional<units_primitives> units;  // the reader-writer lock and semaphore, when the dialect has them
  void renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept override;
};

class index_lease final : public batched_lease<index_state> {
 public:
  index_lease(std::shared_ptr<index_state> st, std::string name, std::string owner, std::chrono::milliseconds ttl,
              steady::time_point start, std::uint64_t fence)
      : batched_lease(std::move(st), std::move(name), std::move(owner), 0, ttl, start, fence) {}

 private:
  void do_release(std::error_code& ec) noexcept override {
    result out;
    const auto v = row();
    const std::string what = "releasing lock " + quoted_name(name());
    if (!run_pooled(*st_, st_->sql.release, v, out, ec, what, index_attempts)) return;
    // A dialect whose release deletes only the last hold (one round trip in the common case)
    // decrements a re-entered row with a second statement. Two rounds: a concurrent release of
    // another hold of the same owner may bring the count from 2 to 1 between the two statements.
    for (int round = 0; out.rows_affected == 0 && !st_->sql.release_reentered.empty() && round < 2; ++round) {
      if (!run_pooled(*st_, st_->sql.release_reentered, v, out, ec, what, index_attempts)) return;
      if (out.rows_affected != 0 || round == 1) break;
      if (!run_pooled(*st_, st_->sql.release, v, out, ec, what, index_attempts)) return;
    }
    if (out.rows_affected == 0)
      set_error(ec, errc::not_owner, what + ": the row was no longer ours (expired, maybe taken over)");
  }
  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    renew_row(ttl, ec, "renewing lock " + quoted_name(name()), "the row is no longer ours", index_attempts);
  }
};

class index_lock final : public strategy_lock<index_state> {
 public:
  using strategy_lock::strategy_lock;

 private:
  // An attempt of this lock's waiting acquire on this thread that readers of the name held off
  // marks the name's reader-writer lock as a waiting writer does (units_primitives::mark_writer),
  // so readers arriving meanwhile stay out and a stream of them cannot starve the mutex; the mark
  // is cleared when the wait ends (and expires by itself). A plain try marks nothing.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    bool readers_hold = false;
    auto l = attempt(ec, readers_hold);
    if (!l && !ec && readers_hold && waiting_lock == this && st_->units) {
      std::error_code ignored;  // best effort: without the mark the mutex still gets in, later
      st_->units->mark_writer(std::string(name()), owner(), options().ttl, ignored);
      marked_while_waiting = marked_while_waiting || !ignored;
    }
    return l;
  }

  // One attempt; `readers_hold`: it missed because the name's reader-writer lock has live holders.
  std::unique_ptr<spi::lease_state> attempt(std::error_code& ec, bool& readers_hold) noexcept {
    const auto start = steady::now();
    result out;
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    auto h = st_->setup.connections->checkout(ec);
    if (!h) return nullptr;
    sql_error err;
    const bool gated = st_->setup.params.fair && !st_->sql.fair_gate.empty();
    const bool fair = st_->setup.params.fair && !gated;
    if (gated) {
      if (!run(*h, st_->sql.fair_gate, v, out, err, index_attempts)) {
        if (transient(err.kind)) return nullptr;
        if (!h->usable()) h.discard();
        set_sql_error(ec, err, "acquiring lock " + quoted_name(v.name));
        return nullptr;
      }
      if (!out.rows.empty()) {  // an older waiter goes first
        keep_our_place(*h, v);
        return nullptr;
      }
    }
    if (!run(*h, fair ? st_->sql.acquire_fair : st_->sql.acquire, v, out, err, index_attempts)) {
      if (err.kind == failure::duplicate_key) return nullptr;  // held: a race on the insert
      // A deadlock/serialization failure that persisted through run()'s retry: contention (other
      // attempts on the same rows), not a broken server; a miss, the caller waits and tries again.
      if (transient(err.kind)) {
        if (gated) keep_our_place(*h, v);
        return nullptr;
      }
      if (!h->usable()) h.discard();
      set_sql_error(ec, err, "acquiring lock " + quoted_name(v.name));
      return nullptr;
    }
    // No row (fair: a row (NULL, NULL)) from a dialect with reader-writer locks and semaphores:
    // those hold the name; a row with a NULL fence: another owner's live row holds the lock.
    const bool units_hold =
        fair ? !out.rows.empty() && out.rows.front().size() > 1 && !out.rows.front()[0] && !out.rows.front()[1]
             : out.rows.empty();
    if (units_hold && !st_->sql.units_in_use.empty()) {
      if (gated) keep_our_place(*h, v);  // a queued mutex keeps its place behind the readers too
      readers_hold = !refuse_beside_a_semaphore(*h, v, ec) && !ec;
      return nullptr;
    }
    const bool granted = !out.rows.empty() && !out.rows.front().empty() && out.rows.front()[0];
    if (gated) {
      if (granted && queued_lock == this) {
        leave_the_queue(*h, v);
        queued_lock = nullptr;
      } else if (!granted) {
        keep_our_place(*h, v);
      }
    }
    if (!granted) return nullptr;
    auto fence = to_int(out.rows.front()[0]);
    if (!fence) {
      set_error(ec, errc::backend_error, "acquiring lock " + quoted_name(v.name) + ": the server returned no fence");
      return nullptr;
    }
    try {
      return std::make_unique<index_lease>(st_, v.name, owner(), options().ttl, start,
                                           static_cast<std::uint64_t>(*fence));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  // Gated fair mode, best effort: a waiter row that was not refreshed expires after ttl (the
  // queue then skips it), and one that was not deleted on a grant is ignored while we hold the
  // lock (the gate passes the holder) and expires after it.
  void keep_our_place(connection& c, const values& v) noexcept {
    if (queued_lock != this) return;
    result out;
    sql_error ignored;
    (void)run(c, st_->sql.fair_refresh, v, out, ignored, index_attempts);
  }
  void leave_the_queue(connection& c, const values& v) noexcept {
    result out;
    sql_error ignored;
    (void)run(c, st_->sql.dequeue, v, out, ignored, index_attempts);
  }

  // The mutex's attempt found live holders of the name's reader-writer lock or semaphore: the
  // lock is held (a reader or writer: a miss, as for another mutex holder), or refused (a
  // semaphore: name_conflict, at once, also for a waiting acquire). The holders may be gone
  // already: then it is a miss, and the next attempt decides.
  // True when it refused.
  bool refuse_beside_a_semaphore(connection& c, const values& v, std::error_code& ec) noexcept {
    result use;
    sql_error err;
    if (!run(c, st_->sql.units_in_use, v, use, err, index_attempts)) {
      if (!transient(err.kind)) set_sql_error(ec, err, "acquiring lock " + quoted_name(v.name));
      return false;
    }
    for (const auto& row : use.rows) {
      if (row.size() < 2 || to_int(row[0]) != semaphore_kind) continue;
      const auto permits = to_int(row[1]).value_or(0);
      if (permits <= 0) continue;
      set_error(ec, errc::name_conflict,
                "lock " + quoted_name(v.name) + " is in use as a semaphore (" + std::to_string(permits) +
                    (permits == 1 ? " permit" : " permits") +
                    " held on the server); a mutex of the same name cannot be taken: use another name");
      return true;
    }
    return false;
  }

  // Outside fair mode, a set of names is one transaction: each member's acquire statement, in the
  // set's canonical order, committed only when every one of them granted, rolled back otherwise,
  // so no other session ever sees part of the set taken. Rows are locked in that one order, so two
  // sets cannot deadlock each other. Anything but a grant or a miss (a deadlock with a single
  // acquire, a lost connection, a name held by a semaphore) is left to the member-by-member path,
  // which waits it out or reports it for the member concerned.
  std::vector<std::unique_ptr<spi::lease_state>> do_try_acquire_set(std::span<distributed_lock* const> set,
                                                                    std::error_code& ec) noexcept override {
    std::vector<std::unique_ptr<spi::lease_state>> granted;
    const auto not_in_one_step = [&] {
      granted.clear();
      ec = make_error_code(errc::not_supported);
      return std::move(granted);
    };
    // Ends the set's transaction on a connection that is still usable, and drops one that is not.
    const auto roll_back = [](auto& handle) {
      if (handle->usable()) {
        sql_error ignored;
        handle->rollback(ignored);
      }
      if (!handle->usable()) handle.discard();
    };
    const auto rolled_back_not_in_one_step = [&](auto& handle) {
      roll_back(handle);
      return not_in_one_step();
    };
    try {
      if (st_->setup.params.fair || st_->sql.acquire.size() != 1) return not_in_one_step();
      std::vector<const index_lock*> members;
      for (auto* l : set) {
        const auto* m = dynamic_cast<const index_lock*>(l);
        if (m == nullptr || m->st_ != st_ || m->options().ttl != options().ttl) return not_in_one_step();
        members.push_back(m);
      }
      const auto start = steady::now();
      auto h = st_->setup.connections->checkout(ec);
      if (!h) return not_in_one_step();
      sql_error err;
      bool whole = h->begin(err), held = false;
      std::vector<std::uint64_t> fences;
      for (const auto* m : members) {
        if (!whole) break;
        values v;
        v.name = std::string(m->name());
        v.owner = m->owner();
        v.ttl_ms = m->options().ttl.count();
        result out;
        whole = run(*h, st_->sql.acquire, v, out, err, 1);
        const auto fence =
            whole && !out.rows.empty() && !out.rows.front().empty() ? to_int(out.rows.front()[0]) : std::nullopt;
        // No row from a dialect with reader-writer locks and semaphores: those may hold the name,
        // and a semaphore's hold is a conflict, not a miss; the member's own try tells which.
        if (whole && out.rows.empty() && !st_->sql.units_in_use.empty()) return rolled_back_not_in_one_step(h);
        if (whole && !fence) held = true;  // another owner's live row
        whole = whole && fence;
        if (fence) fences.push_back(static_cast<std::uint64_t>(*fence));
      }
      if (whole) whole = h->commit(err);
      if (!whole) {
        if (held) {
          roll_back(h);
          return granted;  // nothing taken; a miss
        }
        return rolled_back_not_in_one_step(h);
      }
      for (std::size_t i = 0; i < members.size(); ++i)
        granted.push_back(std::make_unique<index_lease>(st_, std::string(members[i]->name()), members[i]->owner(),
                                                        options().ttl, start, fences[i]));
      return granted;
    } catch (...) {
      return not_in_one_step();  // out of memory: member by member, which reports it
    }
  }

  // Within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec,
                            [this](clock::time_point d, std::error_code& e) { return wait(d, e); });
  }

  std::unique_ptr<spi::lease_state> wait(clock::time_point deadline, std::error_code& ec) noexcept {
    if (st_->setup.params.fair) return fair_acquire_until(deadline, ec);
    if (st_->units && !st_->setup.notifier) {
      // Attempts between the sleeps mark the rw lock (do_try_acquire); every sleep is at most
      // poll.max, which the mark (ttl) outlives when poll.max < ttl, as by default.
      waiting_lock = this;
      marked_while_waiting = false;
      auto l = distributed_lock::do_acquire_until(deadline, ec);
      waiting_lock = nullptr;
      if (marked_while_waiting) st_->units->clear_writer(std::string(name()), owner());
      return l;
    }
    // The core's fair line, its head sleeping on the notifier (do_watch_release): without it every
    // waiter of the process woke at each NOTIFY, all but one missed, and the releasing thread
    // usually took the lock again (32 threads: the least served got 0.08 of the fair share).
    return distributed_lock::do_acquire_until(deadline, ec);
  }

  std::unique_ptr<spi::release_watch> do_watch_release() noexcept override;

  std::unique_ptr<spi::lease_state> wait_until(clock::time_point deadline, std::chrono::milliseconds recheck,
                                               std::error_code& ec) noexcept {
    if (!st_->setup.notifier) return distributed_lock::do_acquire_until(deadline, ec);
    return wait_notified(*st_->setup.notifier, std::string(name()), deadline, recheck, ec,
                         [this](std::error_code& e) { return do_try_acquire(e); });
  }

  // Fair mode: one attempt as a newcomer (granted only when nobody is queued: the uncontended
  // case stays one round trip), then join the waiters table once and retry until our row is the
  // oldest live waiter and the lock is free. Every attempt refreshes our waiter row (server-side
  // expiry = ttl), so attempts come at least every ttl/3; the row leaves on grant (inside the
  // granting statement) or on giving up (dequeue, which wakes the next waiter).
  std::unique_ptr<spi::lease_state> fair_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
    auto l = do_try_acquire(ec);
    if (l || ec || clock::now() >= deadline) return l;
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    v.channel = st_->channel;
    result out;
    {  // joining races with other transactions on the waiters table: a deadlock is contention,
       // retried (jittered) until the deadline, which then is a plain timeout
      auto h = st_->setup.connections->checkout(ec);
      if (!h) return nullptr;
      sql_error err;
      for (unsigned tries = 0; !run(*h, st_->sql.enqueue, v, out, err, index_attempts); ++tries) {
        const auto now = clock::now();
        if (!transient(err.kind)) {
          if (!h->usable()) h.discard();
          set_sql_error(ec, err, "queueing for lock " + quoted_name(v.name));
          return nullptr;
        }
        if (now >= deadline) return nullptr;
        if (!spi::sleep_for(std::min<clock::duration>(spi::backoff_delay(options().poll, tries), deadline - now)))
          return nullptr;  // a stop request
      }
    }
    queued_lock = this;
    auto recheck = std::min<std::chrono::milliseconds>(options().poll.max, options().ttl / 3);
    if (recheck < std::chrono::milliseconds{1}) recheck = std::chrono::milliseconds{1};
    if (st_->setup.notifier) {
      l = wait_until(deadline, recheck, ec);
    } else {  // jittered polling, each sleep capped at `recheck` so our waiter row stays live
      for (unsigned attempt = 0;; ++attempt) {
        l = do_try_acquire(ec);
        const auto now = clock::now();
        if (l || ec || now >= deadline) break;
        auto delay = std::min<clock::duration>(spi::backoff_delay(options().poll, attempt), recheck);
        if (deadline - now < delay) delay = deadline - now;
        if (!spi::sleep_for(delay)) break;  // a stop request: leave the queue as at the deadline
      }
    }
    const bool still_queued = queued_lock == this;
    queued_lock = nullptr;
    if (!l && still_queued) {  // timed out or failed: leave the queue (best effort; the row expires anyway)
      std::error_code ignored;
      run_pooled(*st_, st_->sql.dequeue, v, out, ignored, "leaving the queue of lock " + quoted_name(v.name),
                 index_attempts);
    }
    return l;
  }
};

std::unique_ptr<spi::release_watch> index_lock::do_watch_release() noexcept {
  return watch_notified(st_->setup.notifier.get(), std::string(name()),
                        [this](std::error_code& e) { return do_try_acquire(e); });
}

class index_backend final : public row_inspected_backend<index_state, index_lock> {
 public:
  explicit index_backend(std::shared_ptr<index_state> st) : row_inspected_backend(st, st->setup.primitives) {}

 private:
  // Offered (primitives() set) only when st_->units is.
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override {
    return st_->units->make_rw_lock(std::move(name), rw_caps(), std::move(options));
  }
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override {
    return st_->units->make_semaphore(std::move(name), max_count, semaphore_caps(), std::move(options));
  }
  // Expired lock rows (acquire takes them over anyway: this is for tables other tools write),
  // and with fair=true the rows of waiters that died without leaving the queue.
  std::size_t do_sweep_expired(std::error_code& ec) noexcept override {
    std::size_t swept = 0;
    if (st_->units) {  // and the expired holders of reader-writer locks and semaphores
      swept = st_->units->sweep(ec);
      if (ec) return swept;
    }
    if (st_->setup.params.fair) return swept + sweep_with(*st_, {&st_->sql.sweep, &st_->sql.sweep_waiters}, ec);
    return swept + sweep_with(*st_, {&st_->sql.sweep}, ec);
  }
  std::string do_sweep_target() const override {
    // (The reader-writer lock's and semaphore's tables, <table>_holders and <table>_units, are swept
    // too; the label names the lock table as before.)
    const auto& t = st_->setup.params.table;
    if (st_->setup.params.fair && !st_->sql.sweep_waiters.empty())
      return table_label(t) + " and " + table_label(t, "_waiters");
    return table_label(t);
  }
};

// Every lease named this batch is an index_lease of this backend.
void index_state::renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept {
  renew_batch(*this, {sql.renew_many, sql.renew_many_returns_positions, sql.renew, false}, leases, outcomes);
}

}  // namespace

std::shared_ptr<backend> make_index_backend(backend_setup setup, index_sql sql) {
  setup.primitives = {};  // no units_sql: the mutex only
  return make_index_backend(std::move(setup), std::move(sql), units_sql{});
}

std::shared_ptr<backend> make_index_backend(backend_setup setup, index_sql sql, units_sql units) {
  if (setup.params.fair) {
    const bool gated = !sql.fair_gate.empty() && !sql.fair_refresh.empty();
    if ((sql.acquire_fair.empty() && !gated) || sql.enqueue.empty() || sql.dequeue.empty())
      throw error(errc::invalid_uri, setup.redacted_uri + ": fair=true is not available with this dialect");
    // Declared only when enabled; a fair set waits in each member's queue, member by member.
    setup.caps = setup.caps.with(capability::fair).without(capability::atomic_set);
  }
  auto st = make_state<index_state>(std::move(setup), std::move(sql));
  if (st->setup.params.fair) create_schema(*st, st->sql.create_fair);
  if (!units.grant.empty())
    st->units.emplace(st->setup, std::move(units));
  else
    st->setup.primitives = {};
  // A lock's caps() are its backend's: with read_write / semaphore / writer_preferred when offered.
  st->setup.caps = with_primitives(st->setup.caps, st->setup.primitives);
  return std::make_shared<index_backend>(std::move(st));
}

}  // namespace dlock::sql
