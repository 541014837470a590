#pragma once
// What the three table strategies (index_strategy.cpp, forupdate_strategy.cpp,
// version_strategy.cpp) share: binding a dialect's script to the values of one call, running it
// with the retry rule for deadlocks, the state every lock and lease of a backend keeps alive, the
// skeletons of their leases, locks and backends, and waiting through the dialect's release
// notifier. Internal to sql_common.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/acquire_stop.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/strategies.hpp"

namespace dlock::sql::detail {

using steady = std::chrono::steady_clock;

// The values a script may bind (dialect.hpp: arg).
struct values {
  std::string name;
  std::string owner;
  std::int64_t ttl_ms = 0;
  std::int64_t version = 0;
  std::string channel;
  std::string upper;  // backend::list's range (dialect.hpp: arg::upper, arg::unbounded)
  std::int64_t unbounded = 0;
};

// Deadlocks and serialization failures: "try again", not "broken".
bool transient(failure f) noexcept;
// Before retry `attempt` (0-based) of a statement or transaction rolled back as transient: a short
// growing pause, jittered so that the two sides of a deadlock do not meet again in step.
void pause_before_retry(int attempt) noexcept;

// Runs a script: one statement as it is, several in one transaction. Deadlocks and
// serialization failures are retried (once by default; `attempts` in all).
bool run(connection& c, const script& s, const values& v, result& out, sql_error& err, int attempts = 2) noexcept;

// The integer in a result cell; nullopt for NULL or anything that is not a whole integer.
std::optional<std::int64_t> to_int(const std::optional<std::string>& s);

// A lock name for messages: 'name', bytes outside printable ASCII as \xNN.
std::string quoted_name(const std::string& name);

// "schema"."table" (display only: the dialect quotes for SQL), plus suffixed tables.
std::string table_label(const table_ref& t, std::string_view suffix = {});

// What every lock and lease of one backend shares; leases keep it alive past the backend.
struct shared_state {
  backend_setup setup;
  std::string channel;  // the notifier's, bound as arg::channel by release scripts
};

// Takes the setup and the notifier's channel.
void init_shared(shared_state& st, backend_setup&& setup);
// Runs the DDL when params.create_table (run_ddl: idempotent, racing creators are fine).
void create_schema(shared_state& st, const ddl& statements);

// A script on a pooled connection, dropping the connection if it was lost; ec names `what`.
bool run_pooled(shared_state& st, const script& s, const values& v, result& out, std::error_code& ec,
                std::string_view what, int attempts = 2) noexcept;

// backend::inspect, list and force_release over a dialect's inspection_sql (each throws
// dlock::error; an empty script refuses with not_supported through `refuse`). `waiters`: the fair
// queue is read (fair=true).
lock_info inspect_rows(shared_state& st, const inspection_sql& sql, const std::string& name, bool waiters);
std::vector<std::string> list_rows(shared_state& st, const inspection_sql& sql, const std::string& prefix);
std::vector<lock_holder> force_release_rows(shared_state& st, const inspection_sql& sql, const std::string& name);
// The name range of the names that start with `prefix` (arg::upper, arg::unbounded).
void prefix_range(const std::string& prefix, std::string& upper, bool& bounded);
// Bytes from the hex text a list statement returns (encode(name, 'hex') / HEX(name)).
std::string from_hex(std::string_view hex);

// The watchdog's batched renewal (spi::renewal_batch) of the index and version strategies.
// One lease to renew: its row's key, and its ttl (what the batch statement binds).
struct renewal_key {
  std::string_view name, owner;
  std::int64_t version = 0;  // the version strategy's; 0 for the index strategy
  std::int64_t ttl_ms = 0;
};
// The dialect's statements for it (dialect.hpp: index_sql::renew_many).
struct batch_renewal_sql {
  const std::function<std::string(std::size_t)>& renew_many;
  bool returns_positions;
  const script& renew;  // the single renewal, to find which row of a short batch is no longer ours
  bool binds_version;   // renew_many binds name, owner, version per position (else name, owner)
};
// Renews the rows of `leases` (key_of(*leases[i]): each one's row) on one pooled connection, one
// statement per ttl and 512 distinct rows (several leases of one row, re-entries, are one row),
// and sets outcomes[i] as leases[i]'s single renewal would: success, not_owner (the row is no
// longer ours), or the failure.
void renew_together(shared_state& st, const batch_renewal_sql& sql, std::span<spi::lease_state* const> leases,
                    renewal_key (*key_of)(const spi::lease_state&), std::span<std::error_code> outcomes) noexcept;

// A lease on a row that the watchdog renews in batches (spi::renewal_batch): an index or version
// lock's row, or a units grant's. It keeps its backend's State alive, which holds the dialect's
// statements (`sql`, with `renew` and `renew_many`) and is the batch (renew_batch).
template <class State>
class batched_lease : public spi::lease_state {
 public:
  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }
  spi::renewal_batch* batch() const noexcept override { return st_->sql.renew_many ? st_.get() : nullptr; }
  // Its row for the batch statement, with the ttl it renews for.
  renewal_key key() const noexcept { return {name(), owner_, version_, ttl().count()}; }

 protected:
  // `owner` and `version`: the row's key besides the name, as the owner and version columns
  // hold it (version 0 where the table has none).
  batched_lease(std::shared_ptr<State> st, std::string name, std::string owner, std::int64_t version,
                std::chrono::milliseconds ttl, steady::time_point start, std::uint64_t fence)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        st_(std::move(st)),
        owner_(std::move(owner)),
        version_(version),
        fence_(fence) {}

  const std::string& owner() const noexcept { return owner_; }
  // The row's key as the scripts bind it, and the notifier's channel, which a release notifies.
  values row() const {
    values v;
    v.name = name();
    v.owner = owner_;
    v.version = version_;
    v.channel = st_->channel;
    return v;
  }
  // A single renewal (do_renew): the renew script on the row for `ttl`, run up to `attempts`
  // times (run_pooled's); not_owner, as `what` + `gone`, when it extended no row of ours.
  void renew_row(std::chrono::milliseconds ttl, std::error_code& ec, const std::string& what, std::string_view gone,
                 int attempts = 2) noexcept {
    result out;
    auto v = row();
    v.ttl_ms = ttl.count();
    if (!run_pooled(*st_, st_->sql.renew, v, out, ec, what, attempts)) return;
    if (out.rows_affected == 0) set_error(ec, errc::not_owner, what + ": " + std::string(gone));
  }

  const std::shared_ptr<State> st_;

 private:
  std::string owner_;
  std::int64_t version_;
  std::uint64_t fence_;
};

// State::renew_all (spi::renewal_batch), every lease of the batch being a batched_lease<State>.
template <class State>
void renew_batch(State& st, const batch_renewal_sql& sql, std::span<spi::lease_state* const> leases,
                 std::span<std::error_code> outcomes) noexcept {
  renew_together(
      st, sql, leases, [](const spi::lease_state& l) { return static_cast<const batched_lease<State>&>(l).key(); },
      outcomes);
}

// A lock of a table strategy: its backend's State, which every lock and lease keeps alive.
template <class State>
class strategy_lock : public distributed_lock {
 public:
  strategy_lock(std::shared_ptr<State> st, std::string name, lock_options o)
      : distributed_lock(std::move(name), st->setup.caps, std::move(o)), st_(std::move(st)) {}

 protected:
  const std::shared_ptr<State> st_;
};

// The backend of a strategy, making Locks over its State; `primitives`: what its reader-writer lock
// and semaphore declare (none: the mutex only).
template <class State, class Lock>
class strategy_backend : public backend {
 public:
  explicit strategy_backend(std::shared_ptr<State> st, primitive_caps primitives = {})
      : backend(st->setup.caps, primitives, lock_scope::network, name_limits{st->setup.max_name_length},
                st->setup.defaults, st->setup.redacted_uri),
        st_(std::move(st)) {}

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override {
    return std::make_unique<Lock>(st_, std::move(name), std::move(options));
  }

  const std::shared_ptr<State> st_;
};

// A strategy_backend that answers backend::inspect, list and force_release from its lock rows
// through the State's `sql.inspection` (with fair=true inspect reads the queue's live waiters too);
// where the dialect has no such statement, the core's refusal. force_release ends the grants by the
// dialect's `remove` (the row deleted, or freed where its version must outlive them): the holder's
// renewal and release then match no row of theirs (not_owner).
template <class State, class Lock>
class row_inspected_backend : public strategy_backend<State, Lock> {
 public:
  using strategy_backend<State, Lock>::strategy_backend;

 protected:
  lock_info do_inspect(const std::string& name) override {
    const auto& sql = this->st_->sql.inspection;
    if (sql.holders.empty()) return backend::do_inspect(name);
    return inspect_rows(*this->st_, sql, name, this->st_->setup.params.fair);
  }
  std::vector<std::string> do_list(const std::string& prefix) override {
    const auto& sql = this->st_->sql.inspection;
    if (sql.list.empty()) return backend::do_list(prefix);
    return list_rows(*this->st_, sql, prefix);
  }
  std::vector<lock_holder> do_force_release(const std::string& name) override {
    const auto& sql = this->st_->sql.inspection;
    if (sql.lock_holders.empty() || sql.remove.empty()) return backend::do_force_release(name);
    return force_release_rows(*this->st_, sql, name);
  }
};

// A backend's State: the setup, the dialect's statements, and the lock table created
// (create_schema) from the statements' `create`.
template <class State, class Sql>
std::shared_ptr<State> make_state(backend_setup&& setup, Sql&& sql) {
  auto st = std::make_shared<State>();
  init_shared(*st, std::move(setup));
  st->sql = std::forward<Sql>(sql);
  create_schema(*st, st->sql.create);
  return st;
}

// fair=true asks for the unique-index scheme's waiters table, which `strategy` has not.
void refuse_fair(const backend_setup& setup, std::string_view strategy);

// The sweeper (backend::sweep_expired): each script on a pooled connection, rows summed.
std::size_t sweep_with(shared_state& st, std::initializer_list<const script*> scripts, std::error_code& ec) noexcept;

// Waiting through the dialect's notifier (LISTEN/NOTIFY): arm, try, sleep until a release is
// notified, the holder's ttl could have run out, or the deadline; a last attempt at the deadline.
template <class Try>
std::unique_ptr<spi::lease_state> wait_notified(release_notifier& n, const std::string& name,
                                                steady::time_point deadline, std::chrono::milliseconds recheck,
                                                std::error_code& ec, Try try_once) noexcept {
  for (;;) {
    const auto armed = n.arm(name);
    auto l = try_once(ec);
    const auto now = steady::now();
    if (l || ec || now >= deadline) {
      n.disarm(name);
      return l;
    }
    // A holder that dies releases nothing: its row expires silently, so re-check at `recheck`.
    auto until = deadline;
    if (deadline - now > recheck) until = now + recheck;
    n.wait_for_release(name, armed, until);  // disarms; a stop request ends it too
    if (spi::stop_requested()) return nullptr;
  }
}

// The core's release_watch over the notifier, for the head of this process's fair line (the core
// queues the other waiters of the name, so one notification wakes one waiter here, and a thread
// that releases and asks again at once queues behind the waiters it released to). Armed before
// every attempt, as wait_notified is: a release between the attempt and the wait is not missed.
template <class Try>
class notified_release_watch final : public spi::release_watch {
 public:
  notified_release_watch(release_notifier& notifier, std::string name, Try try_once)
      : notifier_(notifier), name_(std::move(name)), try_once_(std::move(try_once)), armed_(notifier_.arm(name_)) {}
  ~notified_release_watch() override { notifier_.disarm(name_); }
  notified_release_watch(const notified_release_watch&) = delete;
  notified_release_watch& operator=(const notified_release_watch&) = delete;

  std::unique_ptr<spi::lease_state> try_acquire(std::error_code& ec) noexcept override { return try_once_(ec); }
  void wait_until(clock::time_point until) noexcept override {
    notifier_.wait_for_release(name_, armed_, until);  // disarms
    armed_ = notifier_.arm(name_);                     // for the attempt that follows
  }

 private:
  release_notifier& notifier_;
  std::string name_;
  Try try_once_;
  std::uint64_t armed_;
};

template <class Try>
std::unique_ptr<spi::release_watch> watch_notified(release_notifier* notifier, std::string name,
                                                   Try try_once) noexcept {
  if (!notifier) return nullptr;  // no notifier: the head polls with the core's backoff
  try {
    return std::make_unique<notified_release_watch<Try>>(*notifier, std::move(name), std::move(try_once));
  } catch (...) {
    return nullptr;
  }
}

}  // namespace dlock::sql::detail
