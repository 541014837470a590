#pragma once
// backend: an opened URI. Owns the connections (pool, session, subscriber) shared by its locks,
// and makes locks by name. Obtain one from registry::open / dlock::open.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/capabilities.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/election.hpp"
#include "dlock/inspection.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/observer.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

namespace detail {
class local_wait_queues;
class observation_point;
}  // namespace detail

// What names a backend can take. The core rejects empty names and names over max_length bytes
// with errc::invalid_name stating the limit; within the limit, a backend escapes or hashes what
// its server cannot store (spi::safe_key), never letting two distinct names collide.
struct name_limits {
  std::size_t max_length = 1024;
};

class backend : public std::enable_shared_from_this<backend> {
 public:
  virtual ~backend();
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;

  // The mutex's capabilities, plus read_write / semaphore / writer_preferred for the primitives
  // this backend makes beside it.
  capabilities caps() const noexcept { return caps_; }
  // What the leases of this backend's reader-writer locks and semaphores can do (empty sets when
  // it does not make them: caps() then lacks read_write or semaphore).
  capabilities rw_caps() const noexcept { return primitives_.rw_lock.value_or(capabilities{}); }
  capabilities semaphore_caps() const noexcept { return primitives_.semaphore.value_or(capabilities{}); }
  const primitive_caps& primitives() const noexcept { return primitives_; }
  lock_scope scope() const noexcept { return scope_; }
  const name_limits& limits() const noexcept { return limits_; }
  const lock_options& default_options() const noexcept { return defaults_; }
  // The URI this backend was opened with, password redacted.
  const std::string& redacted_uri() const noexcept { return redacted_uri_; }

  // Throws errc::invalid_name for an empty or oversized name. Makes no server round trip.
  [[nodiscard]] std::unique_ptr<distributed_lock> make_lock(std::string_view name);
  [[nodiscard]] std::unique_ptr<distributed_lock> make_lock(std::string_view name, std::error_code& ec) noexcept;
  [[nodiscard]] std::unique_ptr<distributed_lock> make_lock(std::string_view name, lock_options options);
  [[nodiscard]] std::unique_ptr<distributed_lock> make_lock(std::string_view name, lock_options options,
                                                            std::error_code& ec) noexcept;

  // A reader-writer lock, for backends whose caps() has read_write; the others refuse with
  // errc::not_supported naming the schemes that have one. Same name checks as make_lock. The
  // mutex of the same name counts as one of its writers; a semaphore of the same name is refused
  // while either is held (errc::name_conflict), and they while it is.
  [[nodiscard]] std::unique_ptr<rw_lock> make_rw_lock(std::string_view name);
  [[nodiscard]] std::unique_ptr<rw_lock> make_rw_lock(std::string_view name, std::error_code& ec) noexcept;
  [[nodiscard]] std::unique_ptr<rw_lock> make_rw_lock(std::string_view name, lock_options options);
  [[nodiscard]] std::unique_ptr<rw_lock> make_rw_lock(std::string_view name, lock_options options,
                                                      std::error_code& ec) noexcept;

  // A counting semaphore of `max_count` permits (1 to max_semaphore_count), for backends whose
  // caps() has semaphore; the others refuse with errc::not_supported.
  [[nodiscard]] std::unique_ptr<semaphore> make_semaphore(std::string_view name, std::uint32_t max_count);
  [[nodiscard]] std::unique_ptr<semaphore> make_semaphore(std::string_view name, std::uint32_t max_count,
                                                          std::error_code& ec) noexcept;
  [[nodiscard]] std::unique_ptr<semaphore> make_semaphore(std::string_view name, std::uint32_t max_count,
                                                          lock_options options);
  [[nodiscard]] std::unique_ptr<semaphore> make_semaphore(std::string_view name, std::uint32_t max_count,
                                                          lock_options options, std::error_code& ec) noexcept;

  // Several locks taken as one set (dlock/multi_lock.hpp): in byte order of the names, within one
  // deadline, all or nothing. The names are checked as make_lock's; an empty set or a name given
  // twice is refused with errc::invalid_argument / errc::invalid_name saying so. Every member gets
  // `options` and one owner id. Makes no server round trip.
  [[nodiscard]] std::unique_ptr<multi_lock> make_multi_lock(std::vector<std::string> names);
  [[nodiscard]] std::unique_ptr<multi_lock> make_multi_lock(std::vector<std::string> names,
                                                            std::error_code& ec) noexcept;
  [[nodiscard]] std::unique_ptr<multi_lock> make_multi_lock(std::vector<std::string> names, lock_options options);
  [[nodiscard]] std::unique_ptr<multi_lock> make_multi_lock(std::vector<std::string> names, lock_options options,
                                                            std::error_code& ec) noexcept;

  // Leader election among the candidates of `name` (dlock/election.hpp): leadership is a lease of
  // the lock `name`, its term the lease's fencing token. For backends whose caps() has fencing and
  // lost_notification; the others refuse with errc::not_supported naming what they lack. The
  // backend must be owned by a shared_ptr (as open() returns it). Same name checks as make_lock.
  [[nodiscard]] std::unique_ptr<election> make_election(std::string_view name);
  [[nodiscard]] std::unique_ptr<election> make_election(std::string_view name, std::error_code& ec) noexcept;
  [[nodiscard]] std::unique_ptr<election> make_election(std::string_view name, lock_options options);
  [[nodiscard]] std::unique_ptr<election> make_election(std::string_view name, lock_options options,
                                                        std::error_code& ec) noexcept;

  // Tells `target` what this backend's locks, reader-writer locks and semaphores do (see
  // dlock/observer.hpp), those made before the call included; nullptr stops it. The release,
  // renewals and loss of a grant go to the observer that saw its acquire.
  void set_observer(std::shared_ptr<observer> target);
  std::shared_ptr<observer> observed_by() const;  // nullptr when none is set

  // Deletes the expired lock records this backend's server keeps (rows of the SQL table schemes
  // whose expiry has passed on the server's clock, stale waiters of a fair queue), including
  // records other tools wrote, and returns how many it deleted (a record that must outlive its
  // grant, like a version row whose version is the fencing token, is freed instead of deleted,
  // and counted). Never touches a live record. Not
  // needed for correctness (an acquire takes over an expired record itself): it keeps tables
  // small. Backends whose server expires records on its own (Redis, memcached, ZooKeeper
  // sessions) or that hold no records (in-process, connection-bound locks) return 0.
  std::size_t sweep_expired();  // throws dlock::error
  std::size_t sweep_expired(std::error_code& ec) noexcept;
  // What sweep_expired cleans, for messages (e.g. `"dlock_index"` for a table), or empty when
  // this backend keeps no expiring records of its own and sweep_expired always returns 0.
  std::string sweep_target() const;

  // For operators: what the server knows of `name` now (held or not, each holder, the queued
  // waiters where the server queues them). Same name checks as make_lock. Backends that cannot
  // ask their server refuse with errc::not_supported naming the scheme (their README says so).
  lock_info inspect(std::string_view name);  // throws dlock::error
  lock_info inspect(std::string_view name, std::error_code& ec) noexcept;
  // The names held now whose name starts with `prefix`, where the server can enumerate them
  // (sorted, each once); errc::not_supported where it cannot.
  std::vector<std::string> list(std::string_view prefix = {});  // throws dlock::error
  std::vector<std::string> list(std::string_view prefix, std::error_code& ec) noexcept;
  // For operators recovering from a stuck holder: removes the current grant(s) of `name` on the
  // server, whoever holds them, and returns whom it removed (empty when nothing held it). The
  // holders' leases then report the grant lost, or their release says errc::not_owner. It breaks
  // mutual exclusion if the holder is in fact alive: use it only on a holder known to be gone.
  std::vector<lock_holder> force_release(std::string_view name);  // throws dlock::error
  std::vector<lock_holder> force_release(std::string_view name, std::error_code& ec) noexcept;

 protected:
  backend(capabilities caps, lock_scope scope, name_limits limits, lock_options defaults, std::string redacted_uri);
  // A backend that also makes reader-writer locks and/or semaphores: their capabilities.
  backend(capabilities caps, primitive_caps primitives, lock_scope scope, name_limits limits, lock_options defaults,
          std::string redacted_uri);

  // The name is valid and options.owner is set. Should not throw; a throw is mapped to an error.
  virtual std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) = 0;
  // The lock an election of `name` campaigns with. Default: do_make_lock, so that an election and
  // a lock of one name are one lock. A backend whose peers lay elections out otherwise (Curator's
  // LeaderLatch nodes on ZooKeeper) returns a lock in that layout, which still excludes its mutex.
  virtual std::unique_ptr<distributed_lock> do_make_election_lock(std::string name, lock_options options);

  // Called only when primitives() offers the primitive, with a valid name, max_count and options
  // (owner set). Should not throw; a throw is mapped to an error. Defaults: errc::not_supported.
  virtual std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options);
  virtual std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count, lock_options options);

  // One sweep (see sweep_expired). Default: nothing to sweep, 0, no error -- a backend whose
  // server expires records itself (or that keeps none) has nothing left behind to delete.
  virtual std::size_t do_sweep_expired(std::error_code& ec) noexcept;
  virtual std::string do_sweep_target() const;

  // Called with a valid name (or any prefix). May throw dlock::error (or any exception: a
  // backend_error). Defaults: errc::not_supported naming the scheme.
  virtual lock_info do_inspect(const std::string& name);
  virtual std::vector<std::string> do_list(const std::string& prefix);
  virtual std::vector<lock_holder> do_force_release(const std::string& name);

 private:
  // The common checks of every make_* form: the name, the options (owner filled in). False with
  // ec set when one is bad.
  bool check_make(std::string_view name, lock_options& options, std::error_code& ec) const noexcept;
  bool check_lock_name(std::string_view name, std::error_code& ec) const noexcept;
  using lock_maker = std::unique_ptr<distributed_lock> (backend::*)(std::string, lock_options);
  // make_lock's checks and wiring around `maker` (do_make_lock or do_make_election_lock).
  std::unique_ptr<distributed_lock> make_lock_by(lock_maker maker, std::string_view name, lock_options options,
                                                 std::error_code& ec) noexcept;
  [[noreturn]] void refuse_inspection(std::string_view what) const;
  // ec = not_supported naming what this backend lacks and the schemes that have it.
  void refuse_primitive(std::string_view what, capability needed, std::error_code& ec) const noexcept;

  capabilities caps_;
  primitive_caps primitives_;
  lock_scope scope_;
  name_limits limits_;
  lock_options defaults_;
  std::string redacted_uri_;
  // The lines of this process's waiters by name, for the polling wait's fair hand-off (the
  // default distributed_lock::do_acquire_until): one per backend object, as its locks share it.
  std::shared_ptr<detail::local_wait_queues> wait_lines_;
  // Shared with every primitive this backend makes, so that set_observer reaches those made before.
  std::shared_ptr<detail::observation_point> observation_;
};

}  // namespace dlock
