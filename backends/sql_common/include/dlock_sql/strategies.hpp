#pragma once
// The three table strategies, written once over pool + dialect SQL. A dialect's register.cpp
// parses its URI, builds its pool and SQL, and calls one of these.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/spi.hpp"
#include "dlock_sql/dialect.hpp"
#include "dlock_sql/pool.hpp"
#include "dlock_sql/units.hpp"

namespace dlock::sql {

// Optional server-side wake-up of waiters (PostgreSQL LISTEN/NOTIFY on one listener connection
// per backend). wait_for_release returns when a release of `name` was notified, the deadline
// passed, or the listener failed (the caller then re-tries once anyway). Absent: waiters poll
// with the core's jittered backoff (MySQL), and the backend must not declare `blocking`.
class release_notifier {
 public:
  virtual ~release_notifier() = default;
  // The channel bound as arg::channel by release scripts.
  virtual std::string channel() const = 0;
  // Register interest BEFORE the attempt that finds the lock held (no lost wake-up), then wait.
  virtual std::uint64_t arm(const std::string& name) noexcept = 0;
  virtual void wait_for_release(const std::string& name, std::uint64_t armed_at,
                                std::chrono::steady_clock::time_point deadline) noexcept = 0;
  // Undoes arm() when the attempt after it returned without waiting (wait_for_release disarms).
  virtual void disarm(const std::string& name) noexcept = 0;
};

struct backend_setup {
  std::shared_ptr<pool> connections;
  common_params params;
  capabilities caps;
  lock_options defaults;
  std::string redacted_uri;
  std::size_t max_name_length = 512;           // the name column's width in bytes
  std::shared_ptr<release_notifier> notifier;  // may be null
  // What the reader-writer lock and semaphore declare (make_index_backend with units_sql).
  primitive_caps primitives;
};

// Runs DDL statements, each idempotent (IF NOT EXISTS), on a pooled connection (so it also
// connects once: wrong credentials fail here), skipping those whose object a statement's
// unless_exists query finds. Several processes may run it at once: a duplicate-object error from a
// concurrent CREATE is success. Throws dlock::error naming `what`
// (e.g. "creating the lock table"), the URI and `hint` (what to do instead).
void run_ddl(pool& connections, const ddl& statements, const std::string& redacted_uri, std::string_view what,
             std::string_view hint);

// Each runs the DDL first when params.create_table (idempotent; racing processes are fine:
// a duplicate-object error from a concurrent CREATE ... IF NOT EXISTS is treated as success).
// Throws dlock::error (authentication_failed / backend_unavailable / backend_error) at open.
std::shared_ptr<backend> make_index_backend(backend_setup setup, index_sql sql);
// The same, also making reader-writer locks and semaphores (units.hpp) with setup.primitives.
std::shared_ptr<backend> make_index_backend(backend_setup setup, index_sql sql, units_sql units);
std::shared_ptr<backend> make_forupdate_backend(backend_setup setup, forupdate_sql sql);
std::shared_ptr<backend> make_version_backend(backend_setup setup, version_sql sql);

}  // namespace dlock::sql
