// The reader-writer lock and counting semaphore of the unique-index strategy: a pool of units per
// name (units.hpp), one holder row per grant, granted by one statement that locks the pool's
// anchor row, so the count check and the insert are atomic. Waiters poll with the core's backoff.
#include "units_strategy.hpp"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "dlock/acquire_stop.hpp"
#include "dlock_sql/deadline.hpp"

namespace dlock::sql::detail {

struct units_state : shared_state, spi::renewal_batch {
  units_sql sql;
  void renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept override;
};

namespace {

// Each statement is autocommitted on its own: safe to run again after a deadlock.
constexpr int units_attempts = 5;

bool execute(connection& c, const std::string& text, const std::vector<param>& ps, result& out,
             sql_error& err) noexcept {
  for (int attempt = 0;; ++attempt) {
    err = {};
    out = {};
    if (c.execute(text, ps, out, err)) return true;
    if (!transient(err.kind) || attempt + 1 >= units_attempts) return false;
    pause_before_retry(attempt);
  }
}

// One statement on a pooled connection; ec names `what`.
bool execute_pooled(units_state& st, const std::string& text, const std::vector<param>& ps, result& out,
                    std::error_code& ec, const std::string& what) noexcept {
  auto h = st.setup.connections->checkout(ec);
  if (!h) return false;
  sql_error err;
  if (execute(*h, text, ps, out, err)) return true;
  if (!h->usable()) h.discard();
  set_sql_error(ec, err, what);
  return false;
}

// A grant's id: the lock object's owner, made unique per grant (one object may hold several
// reads, or several permit sets) and per process (two processes may be given the same owner).
std::string new_grant_id(const std::string& owner) {
  static const std::uint64_t process_nonce = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  static std::atomic<std::uint64_t> counter{0};
  char tail[40];
  const int n = std::snprintf(tail, sizeof tail, "#%016llx.%llu", static_cast<unsigned long long>(process_nonce),
                              static_cast<unsigned long long>(++counter));
  return owner + std::string(tail, static_cast<std::size_t>(n));
}

const char* primitive_label(std::int64_t kind) { return kind == rw_kind ? "reader-writer lock " : "semaphore "; }

// The holder row's owner column holds the grant's id (owner()).
class units_lease final : public batched_lease<units_state> {
 public:
  units_lease(std::shared_ptr<units_state> st, std::int64_t kind, std::string name, std::string grant_id,
              std::chrono::milliseconds ttl, steady::time_point start, std::uint64_t fence)
      : batched_lease(std::move(st), std::move(name), std::move(grant_id), 0, ttl, start, fence), kind_(kind) {}

 private:
  void do_release(std::error_code& ec) noexcept override {
    try {
      const std::string what = std::string("releasing ") + primitive_label(kind_) + quoted_name(name());
      result out;
      if (!execute_pooled(*st_, st_->sql.release, {bytes{name()}, kind_, owner()}, out, ec, what)) return;
      const bool was_live = !out.rows.empty() && !out.rows.front().empty() && to_int(out.rows.front()[0]) == 1;
      if (!was_live) set_error(ec, errc::not_owner, what + ": the grant was no longer ours (expired)");
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
    }
  }
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    try {
      const std::string what = std::string("renewing ") + primitive_label(kind_) + quoted_name(name());
      renew_row(ttl, ec, what, "the grant is no longer ours", units_attempts);
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
    }
  }

  std::int64_t kind_;
};

// One pool (kind, name, max_count) as the two primitives see it.
class units_pool {
 public:
  units_pool(std::shared_ptr<units_state> st, std::int64_t kind, std::string name, std::int64_t max_count)
      : st_(std::move(st)), kind_(kind), name_(std::move(name)), max_count_(max_count) {}

  // One attempt at `units`: a lease, nullptr when they do not fit now (or a live writer mark
  // holds readers back), nullptr with ec on failure (name_conflict: another max_count).
  std::unique_ptr<spi::lease_state> attempt(std::int64_t units, bool heed_writer_mark, const std::string& owner,
                                            std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
    try {
      const auto start = steady::now();
      const std::string grant_id = new_grant_id(owner);
      const std::vector<param> grant{grant_id,
                                     units,
                                     std::int64_t{ttl.count()},
                                     kind_,
                                     bytes{name_},
                                     max_count_,
                                     std::int64_t{heed_writer_mark ? 1 : 0},
                                     units};
      auto h = st_->setup.connections->checkout(ec);
      if (!h) return nullptr;
      // Two rounds at most: the first attempt on a new name (or on an idle name whose max_count
      // changed) finds no anchor to lock, makes it, and tries again.
      for (int round = 0; round < 2; ++round) {
        result out;
        sql_error err;
        if (!execute(*h, st_->sql.grant, grant, out, err)) {
          if (transient(err.kind)) return nullptr;  // contention that outlasted the retries: a miss
          return failed(h, err, "acquiring", ec);
        }
        if (!out.rows.empty() && !out.rows.front().empty()) {
          const auto fence = to_int(out.rows.front()[0]);
          if (!fence) {
            set_error(ec, errc::backend_error, label("acquiring") + ": the server returned no fence");
            return nullptr;
          }
          return std::make_unique<units_lease>(st_, kind_, name_, grant_id, ttl, start,
                                               static_cast<std::uint64_t>(*fence));
        }
        if (!explain_miss(*h, ec) || round == 1) return nullptr;
      }
      return nullptr;
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  // A waiting writer's mark on the anchor (ttl from now), and clearing it once granted or given up.
  void mark_writer(const std::string& owner, std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
    try {
      result out;
      execute_pooled(*st_, st_->sql.mark_writer, {std::int64_t{ttl.count()}, owner, kind_, bytes{name_}}, out, ec,
                     label("marking a waiting writer of"));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
    }
  }
  void clear_writer(const std::string& owner) noexcept {
    try {
      result out;
      std::error_code ignored;  // best effort: the mark expires by itself
      execute_pooled(*st_, st_->sql.clear_writer, {kind_, bytes{name_}, owner}, out, ignored, label("clearing"));
    } catch (...) {
    }
  }

 private:
  std::string label(std::string_view doing) const {
    return std::string(doing) + " " + primitive_label(kind_) + quoted_name(name_);
  }

  std::unique_ptr<spi::lease_state> failed(pool::handle& h, const sql_error& err, std::string_view doing,
                                           std::error_code& ec) const {
    if (!h->usable()) h.discard();
    set_sql_error(ec, err, label(doing));
    return nullptr;
  }

  // After a grant statement inserted nothing: true when it is worth one more attempt (the anchor
  // was missing, or this idle pool took our max_count). False with !ec for a plain miss (and the
  // pool's expired holder rows are deleted on the way), false with ec set on a max_count mismatch
  // or a failure.
  bool explain_miss(connection& c, std::error_code& ec) {
    result out;
    sql_error err;
    if (!execute(c, st_->sql.inspect, {kind_, bytes{name_}}, out, err)) {
      if (!transient(err.kind)) set_sql_error(ec, err, label("acquiring"));
      return false;
    }
    if (out.rows.empty()) {  // a new name: make its anchor
      if (!execute(c, st_->sql.create_anchor, {kind_, bytes{name_}, max_count_}, out, err)) {
        if (!transient(err.kind)) set_sql_error(ec, err, label("creating the anchor of"));
        return false;
      }
      return true;
    }
    // Copied out: `out` is reused below.
    const auto& r = out.rows.front();
    const std::int64_t stored = !r.empty() ? to_int(r[0]).value_or(-1) : -1;
    const std::int64_t live = r.size() > 1 ? to_int(r[1]).value_or(0) : 0;
    const std::int64_t expired = r.size() > 2 ? to_int(r[2]).value_or(0) : 0;
    const bool mutex_live = r.size() > 3 && to_int(r[3]).value_or(0) != 0;
    const std::int64_t other_kind = r.size() > 4 ? to_int(r[4]).value_or(0) : 0;
    if (expired > 0) execute(c, st_->sql.delete_expired, {kind_, bytes{name_}}, out, err);
    // One name, one lock: the mutex of the name holds it as a writer would (a miss for the
    // reader-writer lock), and refuses the semaphore; the other pool of the name refuses this one.
    const char* conflict = nullptr;
    std::string held;
    if (other_kind > 0) {
      conflict = kind_ == rw_kind ? "a semaphore" : "a reader-writer lock";
      held = kind_ == rw_kind
                 ? std::to_string(other_kind) + (other_kind == 1 ? " permit" : " permits") + " held on the server"
                 : (other_kind >= rw_units
                        ? std::string("held by a writer")
                        : "held by " + std::to_string(other_kind) + (other_kind == 1 ? " reader" : " readers"));
    } else if (mutex_live && kind_ == semaphore_kind) {
      conflict = "a mutex";
      held = "held on the server";
    }
    if (conflict) {
      set_error(ec, errc::name_conflict,
                "lock " + quoted_name(name_) + " is in use as " + conflict + " (" + held + "); " +
                    (kind_ == rw_kind ? "a reader-writer lock" : "a semaphore") +
                    " of the same name cannot be taken: use another name");
      return false;
    }
    if (mutex_live) return false;            // a reader-writer lock waits for the mutex as for a writer
    if (stored == max_count_) return false;  // not enough free (or a writer waits): a miss
    if (live == 0) {                         // idle: it takes our max_count if nobody came meanwhile
      if (!execute(c, st_->sql.reset_max_count, {max_count_, kind_, bytes{name_}, kind_, bytes{name_}}, out, err)) {
        if (!transient(err.kind)) set_sql_error(ec, err, label("acquiring"));
        return false;
      }
      if (out.rows_affected == 1) return true;
    }
    set_error(ec, errc::name_conflict,
              label("acquiring") + ": it is in use with max_count " + std::to_string(stored) + "; this one says " +
                  std::to_string(max_count_) + " (every user of a name must give the same)");
    return false;
  }

  std::shared_ptr<units_state> st_;
  std::int64_t kind_;
  std::string name_;
  std::int64_t max_count_;
};

class units_rw_lock final : public rw_lock {
 public:
  units_rw_lock(std::shared_ptr<units_state> st, std::string name, capabilities caps, lock_options o)
      : rw_lock(name, caps, std::move(o)), pool_(std::move(st), rw_kind, std::move(name), rw_units) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    if (side == access::read) return pool_.attempt(1, true, owner(), options().ttl, ec);
    return pool_.attempt(rw_units, false, owner(), options().ttl, ec);
  }

  // A waiting writer marks the anchor after each miss, so readers arriving meanwhile stay out
  // (writer preference); attempts come at least every ttl/3, keeping the mark live. Readers wait
  // as the core's default does.
  // Within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec,
                            [&](clock::time_point d, std::error_code& e) { return wait(side, d, e); });
  }

  std::unique_ptr<spi::lease_state> wait(access side, clock::time_point deadline, std::error_code& ec) noexcept {
    if (side == access::read) return rw_lock::do_acquire_until(side, deadline, ec);
    const auto ttl = options().ttl;
    auto recheck = std::min<std::chrono::milliseconds>(options().poll.max, ttl / 3);
    if (recheck < std::chrono::milliseconds{1}) recheck = std::chrono::milliseconds{1};
    bool marked = false;
    std::unique_ptr<spi::lease_state> l;
    for (unsigned attempt = 0;; ++attempt) {
      l = pool_.attempt(rw_units, false, owner(), ttl, ec);
      const auto now = clock::now();
      if (l || ec || now >= deadline) break;
      pool_.mark_writer(owner(), ttl, ec);
      if (ec) break;
      marked = true;
      auto delay = std::min<clock::duration>(spi::backoff_delay(options().poll, attempt), recheck);
      if (deadline - now < delay) delay = deadline - now;
      if (!spi::sleep_for(delay)) break;  // a stop request
    }
    if (marked) pool_.clear_writer(owner());
    return l;
  }

  units_pool pool_;
};

class units_semaphore final : public deadline_semaphore {
 public:
  units_semaphore(std::shared_ptr<units_state> st, std::string name, std::uint32_t max_count, capabilities caps,
                  lock_options o)
      : deadline_semaphore(name, max_count, caps, std::move(o)),
        pool_(std::move(st), semaphore_kind, std::move(name), max_count) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    return pool_.attempt(permits, false, owner(), options().ttl, ec);
  }

  units_pool pool_;
};

}  // namespace

// Every lease named this batch is a units_lease of this state.
void units_state::renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept {
  renew_batch(*this, {sql.renew_many, false, sql.renew, false}, leases, outcomes);
}

units_primitives::units_primitives(backend_setup setup, units_sql sql) : st_(std::make_shared<units_state>()) {
  init_shared(*st_, std::move(setup));
  st_->sql = std::move(sql);
  create_schema(*st_, st_->sql.create);
}

std::unique_ptr<rw_lock> units_primitives::make_rw_lock(std::string name, capabilities caps,
                                                        lock_options options) const {
  return std::make_unique<units_rw_lock>(st_, std::move(name), caps, std::move(options));
}

std::unique_ptr<semaphore> units_primitives::make_semaphore(std::string name, std::uint32_t max_count,
                                                            capabilities caps, lock_options options) const {
  return std::make_unique<units_semaphore>(st_, std::move(name), max_count, caps, std::move(options));
}

void units_primitives::mark_writer(const std::string& name, const std::string& owner, std::chrono::milliseconds ttl,
                                   std::error_code& ec) const noexcept {
  try {
    units_pool(st_, rw_kind, name, rw_units).mark_writer(owner, ttl, ec);
  } catch (...) {
    set_error(ec, errc::backend_error, "out of memory");
  }
}

void units_primitives::clear_writer(const std::string& name, const std::string& owner) const noexcept {
  try {
    units_pool(st_, rw_kind, name, rw_units).clear_writer(owner);
  } catch (...) {
  }
}

std::size_t units_primitives::sweep(std::error_code& ec) const noexcept {
  return sweep_with(*st_, {&st_->sql.sweep, &st_->sql.sweep_anchors}, ec);
}

}  // namespace dlock::sql::detail
