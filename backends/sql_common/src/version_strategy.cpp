// The optimistic-version strategy (make_version_backend): read the row's version, then move it
// only if nobody did meanwhile and the grant is free or expired; the version is the fencing token.
#include <span>

#include "dlock_sql/deadline.hpp"
#include "strategy_common.hpp"

namespace dlock::sql {
using namespace detail;
namespace {

// The watchdog's batches of one backend (spi::renewal_batch): strategy_common's renew_together.
struct version_state : shared_state, spi::renewal_batch {
  version_sql sql;
  void renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept override;
};

class version_lease final : public batched_lease<version_state> {
 public:
  // `version`: the row's after the grant, which is the fencing token.
  version_lease(std::shared_ptr<version_state> st, std::string name, std::string owner, std::chrono::milliseconds ttl,
                steady::time_point start, std::int64_t version)
      : batched_lease(std::move(st), std::move(name), std::move(owner), version, ttl, start,
                      static_cast<std::uint64_t>(version)) {}

 private:
  void do_release(std::error_code& ec) noexcept override {
    result out;
    if (!run_pooled(*st_, st_->sql.release, row(), out, ec, "releasing lock " + quoted_name(name()))) return;
    if (out.rows_affected == 0)
      set_error(ec, errc::not_owner,
                "releasing lock " + quoted_name(name()) + ": the version moved on (expired and taken over)");
  }
  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    renew_row(ttl, ec, "renewing lock " + quoted_name(name()), "the version moved on");
  }
};

class version_lock final : public strategy_lock<version_state> {
 public:
  using strategy_lock::strategy_lock;

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    const auto start = steady::now();
    values v;
    v.name = std::string(name());
    v.owner = owner();
    v.ttl_ms = options().ttl.count();
    const std::string what = "acquiring lock " + quoted_name(v.name);
    auto h = st_->setup.connections->checkout(ec);
    if (!h) return nullptr;
    sql_error err;
    result out;
    auto fail = [&]() -> std::unique_ptr<spi::lease_state> {
      if (!h->usable()) h.discard();
      if (transient(err.kind)) return nullptr;
      set_sql_error(ec, err, what);
      return nullptr;
    };
    if (!run(*h, st_->sql.read, v, out, err)) return fail();
    if (out.rows.empty()) {  // first use of this name
      if (!run(*h, st_->sql.ensure_row, v, out, err) && err.kind != failure::duplicate_key) return fail();
      if (!run(*h, st_->sql.read, v, out, err)) return fail();
      if (out.rows.empty()) {
        set_error(ec, errc::backend_error, what + ": the row vanished after it was inserted");
        return nullptr;
      }
    }
    const auto& r = out.rows.front();
    auto version = !r.empty() ? to_int(r[0]) : std::nullopt;
    auto is_free = r.size() > 1 ? to_int(r[1]) : std::nullopt;
    if (!version || !is_free) {
      set_error(ec, errc::backend_error, what + ": unexpected row from the version read");
      return nullptr;
    }
    if (*is_free == 0) return nullptr;  // held and live
    v.version = *version;
    if (!run(*h, st_->sql.acquire, v, out, err)) return fail();
    if (out.rows_affected == 0) return nullptr;  // someone else moved the version first
    try {
      return std::make_unique<version_lease>(st_, v.name, owner(), options().ttl, start, *version + 1);
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  // Waiting is the core's fair line; its head sleeps on the notifier where there is one.
  // The core's wait, within the deadline whatever the server does (dlock_sql/deadline.hpp).
  std::unique_ptr<spi::lease_state> do_acquire_until(clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_out_outages(deadline, options().poll, ec, [this](clock::time_point d, std::error_code& e) {
      return distributed_lock::do_acquire_until(d, e);
    });
  }

  std::unique_ptr<spi::release_watch> do_watch_release() noexcept override {
    return watch_notified(st_->setup.notifier.get(), std::string(name()),
                          [this](std::error_code& e) { return do_try_acquire(e); });
  }
};

class version_backend final : public row_inspected_backend<version_state, version_lock> {
 public:
  using row_inspected_backend::row_inspected_backend;

 private:
  // Expired grants are freed, their rows kept: the version column is the fencing token.
  std::size_t do_sweep_expired(std::error_code& ec) noexcept override {
    return sweep_with(*st_, {&st_->sql.sweep}, ec);
  }
  std::string do_sweep_target() const override {
    if (st_->sql.sweep.empty()) return {};
    return table_label(st_->setup.params.table) + " (grants freed, rows kept: the version is the fencing token)";
  }
};

// Every lease named this batch is a version_lease of this backend.
void version_state::renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept {
  renew_batch(*this, {sql.renew_many, sql.renew_many_returns_positions, sql.renew, true}, leases, outcomes);
}

}  // namespace

std::shared_ptr<backend> make_version_backend(backend_setup setup, version_sql sql) {
  refuse_fair(setup, "optimistic-version");
  auto st = make_state<version_state>(std::move(setup), std::move(sql));
  return std::make_shared<version_backend>(std::move(st));
}

}  // namespace dlock::sql
