// The optimistic-version strategy (make_version_backend): read the row's version, then move it
// only if nobody did meanwhile and the grant is free or expired; the version is the fencing token.
#include <algorithm>
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

class version_lease final : public spi::lease_state {
 public:
  version_lease(std::shared_ptr<version_state> st, std::string name, std::string owner, std::chrono::milliseconds ttl,
                steady::time_point start, std::int64_t version)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        st_(std::move(st)),
        owner_(std::move(owner)),
        version_(version) {}
  std::optional<std::uint64_t> fencing_token() const noexcept override { return static_cast<std::uint64_t>(version_); }
  spi::renewal_batch* batch() const noexcept override { return st_->sql.renew_many ? st_.get() : nullptr; }
  const std::string& owner() const noexcept { return owner_; }
  std::int64_t version() const noexcept { return version_; }

 private:
  void do_release(std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.version = version_;
    v.channel = st_->channel;
    if (!run_pooled(*st_, st_->sql.release, v, out, ec, "releasing lock " + quoted_name(name()))) return;
    if (out.rows_affected == 0)
      set_error(ec, errc::not_owner,
                "releasing lock " + quoted_name(name()) + ": the version moved on (expired and taken over)");
  }
  // valid_until moves in the core (lease_state::renew) once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    result out;
    values v;
    v.name = name();
    v.owner = owner_;
    v.ttl_ms = ttl.count();
    v.version = version_;
    if (!run_pooled(*st_, st_->sql.renew, v, out, ec, "renewing lock " + quoted_name(name()))) return;
    if (out.rows_affected == 0) {
      set_error(ec, errc::not_owner, "renewing lock " + quoted_name(name()) + ": the version moved on");
    }
  }

  std::shared_ptr<version_state> st_;
  std::string owner_;
  std::int64_t version_;
};

class version_lock final : public distributed_lock {
 public:
  version_lock(std::shared_ptr<version_state> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->setup.caps, std::move(o)), st_(std::move(st)) {}

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

  std::shared_ptr<version_state> st_;
};

class version_backend final : public backend {
 public:
  explicit version_backend(std::shared_ptr<version_state> st)
      : backend(st->setup.caps, lock_scope::network, name_limits{st->setup.max_name_length}, st->setup.defaults,
                st->setup.redacted_uri),
        st_(std::move(st)) {}

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<version_lock>(st_, std::move(name), std::move(options));
  }
  // Expired grants are freed, their rows kept: the version column is the fencing token.
  std::size_t do_sweep_expired(std::error_code& ec) noexcept override {
    return sweep_with(*st_, {&st_->sql.sweep}, ec);
  }
  std::string do_sweep_target() const override {
    if (st_->sql.sweep.empty()) return {};
    return table_label(st_->setup.params.table) + " (grants freed, rows kept: the version is the fencing token)";
  }
  std::shared_ptr<version_state> st_;
};

// Every lease named this batch is a version_lease of this backend.
void version_state::renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept {
  try {
    std::vector<renewal_key> keys;
    keys.reserve(leases.size());
    for (const auto* l : leases) {
      const auto& lease = static_cast<const version_lease&>(*l);
      keys.push_back({lease.name(), lease.owner(), lease.version(), lease.ttl().count()});
    }
    renew_together(*this, {sql.renew_many, sql.renew_many_returns_positions, sql.renew, true}, keys, outcomes);
  } catch (...) {
    std::error_code ec;
    set_error(ec, errc::backend_error, "out of memory renewing");
    std::fill(outcomes.begin(), outcomes.end(), ec);
  }
}

}  // namespace

std::shared_ptr<backend> make_version_backend(backend_setup setup, version_sql sql) {
  if (setup.params.fair)
    throw error(errc::invalid_uri, setup.redacted_uri +
                                       ": fair=true applies to the unique-index scheme only (the optimistic-version"
                                       " strategy has no waiters table)");
  auto st = std::make_shared<version_state>();
  init_shared(*st, std::move(setup));
  st->sql = std::move(sql);
  create_schema(*st, st->sql.create);
  return std::make_shared<version_backend>(std::move(st));
}

}  // namespace dlock::sql
