// The SELECT ... FOR UPDATE strategy (make_forupdate_backend): the row lock of a transaction held
// on a dedicated connection for the lease; the server queues waiters and frees the row when the
// session ends, which the session monitor (session_lease.hpp) notices.
#include <algorithm>

#include "dlock_sql/deadline.hpp"
#include "dlock_sql/session_lease.hpp"
#include "strategy_common.hpp"

namespace dlock::sql {
using namespace detail;
namespace {

struct forupdate_state : shared_state {
  forupdate_sql sql;
  // Confirms the sessions that hold the row locks (session_lease.hpp): a session the server
  // closed, or one that stops answering for ttl, is a lost lock.
  std::shared_ptr<session_monitor> monitor;
};

class forupdate_lease final : public session_lease {
 public:
  forupdate_lease(std::shared_ptr<forupdate_state> st, std::string name, std::chrono::milliseconds ttl,
                  clock::time_point start, bool confirm, pool::handle h, std::uint64_t fence)
      : session_lease(st->monitor, std::move(name), ttl, start, confirm, std::move(h)),
        st_(std::move(st)),
        fence_(fence) {
    start_watching();
  }
  ~forupdate_lease() override {
    stop_watching();
    std::lock_guard lk(connection_mutex());
    if (connection()) {  // never released: roll back so the connection goes back clean
      sql_error ignored;
      const bool clean = connection()->usable() && connection()->rollback(ignored);
      end_session(clean && connection()->usable());
    }
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }

 private:
  // The transaction holds the row lock: COMMIT releases it.
  void release_session(std::error_code& ec) noexcept override {
    sql_error err;
    if (!connection()->commit(err)) {
      set_sql_error(ec, err, release_label() + " (commit)");
      if (err.kind == failure::connection_lost) ec = make_error_code(errc::not_owner);
      end_session(false);
      return;
    }
    end_session(connection()->usable());  // back to the pool
  }
  std::string release_label() const override { return "releasing lock " + quoted_name(name()); }
  std::string_view freed_with_session() const noexcept override {
    return "its connection was lost, and the database released the row lock then";
  }

  std::shared_ptr<forupdate_state> st_;
  std::uint64_t fence_;
};

class forupdate_lock final : public strategy_lock<forupdate_state> {
 public:
  using strategy_lock::strategy_lock;

 private:
  std::unique_ptr<spi::lease_state> attempt(std::optional<clock::time_point> deadline, std::error_code& ec) noexcept {
    values v;
    v.name = std::string(name());
    auto h = st_->setup.connections->checkout_dedicated(ec);
    if (!h) return nullptr;
    auto start = clock::now();  // the lease's validity counts from before the grant
    const std::string what = "acquiring lock " + quoted_name(v.name);
    sql_error err;
    result out;
    auto fail = [&]() -> std::unique_ptr<spi::lease_state> {
      if (h->usable()) {
        sql_error ignored;
        h->rollback(ignored);
      }
      if (!h->usable()) h.discard();
      if (err.kind == failure::lock_not_available || transient(err.kind)) return nullptr;  // held
      set_sql_error(ec, err, what);
      return nullptr;
    };
    // BEGIN, [the wait bound], lock the row; a name seen for the first time has no row yet:
    // insert it outside the transaction (a concurrent insert is fine) and lock again.
    auto lock_row = [&]() -> bool {
      if (!h->begin(err)) return false;
      if (deadline) {
        std::optional<std::chrono::milliseconds> wait;
        if (*deadline != clock::time_point::max()) {
          auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
          wait = std::max(left, std::chrono::milliseconds{1});
        }
        if (!h->set_lock_wait_timeout(wait, err)) return false;
        const stoppable_statements waiting;  // a stop request ends the wait on the row
        return run(*h, st_->sql.lock_wait, v, out, err);
      }
      return run(*h, st_->sql.lock_nowait, v, out, err);
    };
    if (!lock_row()) return fail();
    if (out.rows.empty()) {
      if (!h->rollback(err)) return fail();
      if (!run(*h, st_->sql.ensure_row, v, out, err) && err.kind != failure::duplicate_key) return fail();
      if (!lock_row()) return fail();
      if (out.rows.empty()) {
        err = {failure::other, "", "the lock row vanished after it was inserted (deleted by another tool?)"};
        return fail();
      }
    }
    if (!rebase_after_wait(*h, options().ttl, start, err)) return fail();
    if (!st_->sql.bump_fence.empty() && !run(*h, st_->sql.bump_fence, v, out, err)) return fail();
    auto fence = out.rows.empty() || out.rows.front().empty() ? std::nullopt : to_int(out.rows.front()[0]);
    if (!fence) {
      err = {failure::other, "", "the fence update returned no row"};
      return fail();
    }
    try {
      return std::make_unique<forupdate_lease>(st_, v.name, options().ttl, start, options().watchdog, std::move(h),
                                               static_cast<std::uint64_t>(*fence));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    return attempt(std::nullopt, ec);
  }
  // The server queues us on the row lock, bounded by the session's lock wait timeout.
  // Within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec, [this](clock::time_point d, std::error_code& e) {
      for (;;) {
        auto l = attempt(d, e);
        if (l || e) return l;
        if (clock::now() >= d) return attempt(std::nullopt, e);  // the last attempt at the deadline
      }
    });
  }
};

// The row locks live in their holders' open transactions: the server says which session holds
// one (forupdate_sql::held_rows), and force_release ends that session.
class forupdate_backend final : public strategy_backend<forupdate_state, forupdate_lock> {
 public:
  using strategy_backend::strategy_backend;

 private:
  std::vector<forupdate_sql::held_row> held(const forupdate_sql::name_range& range, const std::string& what) {
    std::error_code ec;
    auto h = st_->setup.connections->checkout(ec);
    if (!h) throw error(ec, last_error_message());
    std::vector<forupdate_sql::held_row> rows;
    sql_error err;
    if (!st_->sql.held_rows(*h, range, rows, err)) {
      if (!h->usable()) h.discard();
      set_sql_error(ec, err, what);
      throw error(ec, last_error_message());
    }
    return rows;
  }
  lock_holder holder_of(const forupdate_sql::held_row& r) const {
    lock_holder h;
    h.owner = st_->sql.session_label + std::to_string(r.session);
    if (r.fence && *r.fence >= 0) h.fencing_token = static_cast<std::uint64_t>(*r.fence);
    return h;
  }

  lock_info do_inspect(const std::string& name) override {
    if (!st_->sql.held_rows) return backend::do_inspect(name);
    forupdate_sql::name_range range;
    range.from = name;
    range.exact = true;
    lock_info info;
    info.name = name;
    for (const auto& r : held(range, "inspecting lock " + quoted_name(name))) info.holders.push_back(holder_of(r));
    info.held = !info.holders.empty();
    return info;
  }
  std::vector<std::string> do_list(const std::string& prefix) override {
    if (!st_->sql.held_rows) return backend::do_list(prefix);
    forupdate_sql::name_range range;
    range.from = prefix;
    prefix_range(prefix, range.upper, range.bounded);
    std::vector<std::string> names;
    for (const auto& r : held(range, "listing the held locks of " + st_->setup.redacted_uri))
      names.push_back(from_hex(r.hex_name));
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }
  // Ends the holding session: the server rolls its transaction back, freeing the row lock (and
  // every other lock that session held); the holder's session monitor reports the loss.
  std::vector<lock_holder> do_force_release(const std::string& name) override {
    if (!st_->sql.held_rows || !st_->sql.end_session) return backend::do_force_release(name);
    forupdate_sql::name_range range;
    range.from = name;
    range.exact = true;
    const std::string what = "breaking lock " + quoted_name(name);
    std::vector<lock_holder> removed;
    for (const auto& r : held(range, what)) {
      std::error_code ec;
      auto h = st_->setup.connections->checkout(ec);
      if (!h) throw error(ec, last_error_message());
      result out;
      sql_error err;
      if (!h->execute(st_->sql.end_session(r.session), {}, out, err)) {
        if (!h->usable()) h.discard();
        set_sql_error(ec, err, what + " (ending " + st_->sql.session_label + std::to_string(r.session) + ")");
        throw error(ec, last_error_message());
      }
      removed.push_back(holder_of(r));
    }
    return removed;
  }
};

}  // namespace

std::shared_ptr<backend> make_forupdate_backend(backend_setup setup, forupdate_sql sql) {
  refuse_fair(setup, "FOR UPDATE");
  auto st = make_state<forupdate_state>(std::move(setup), std::move(sql));
  st->monitor = std::make_shared<session_monitor>();
  return std::make_shared<forupdate_backend>(std::move(st));
}

}  // namespace dlock::sql
