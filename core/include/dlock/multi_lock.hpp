#pragma once
// multi_lock: several named locks of one backend taken as one set, for work that needs all of them.
//
//   auto both = backend->make_multi_lock({"account/42", "account/7"});
//   if (auto held = both->try_acquire_for(std::chrono::seconds(5))) { ...transfer... }
//
//  * Canonical order: the names are taken in byte order whatever order they were given in, so two
//    callers wanting overlapping sets can never each hold a name the other waits for (no deadlock).
//  * One deadline covers the whole set: each member waits only for what is left of it, so a set of
//    N contended names gives up by the one deadline, not after N timeouts.
//  * All or nothing: a timeout, an error or a stop request releases every member already taken
//    (in reverse order) before returning; no partial hold is left.
//  * One loss: the set's lost_token fires when any member is lost.
// The members are the backend's ordinary locks (make_lock with the same lock_options and one owner
// for the set): each member is renewed by the watchdog as any lease is, and fences with its own
// token. A set is first tried in one round trip that takes all of it or none of it, where the
// backend can (one Redis script, one SQL transaction, one etcd Txn; capability::atomic_set: for
// every set); otherwise, and to wait for a set that was held, it is taken member by member in
// canonical order.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/capabilities.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock_options.hpp"

namespace dlock {

// The proof of holding every member of a multi_lock. Move-only RAII: destroying a held set releases
// it. An empty multi_lease means "not acquired" (a member was held by someone else), never an error.
class multi_lease {
 public:
  using clock = std::chrono::steady_clock;

  multi_lease() noexcept;
  // The members' leases, in the order they were taken (multi_lock passes them in canonical order).
  explicit multi_lease(std::vector<lease> members);
  multi_lease(multi_lease&&) noexcept;
  multi_lease& operator=(multi_lease&& other) noexcept;  // releases the set it overwrites
  multi_lease(const multi_lease&) = delete;
  multi_lease& operator=(const multi_lease&) = delete;
  // Best-effort release of every member; a failure is reported through report_background_error.
  ~multi_lease();

  explicit operator bool() const noexcept { return grant_ != nullptr; }
  // Every member held (lease::held), and the set not known to be lost.
  bool held() const noexcept;

  // The members, in canonical (byte) order of their names; empty for an empty set.
  std::span<const lease> members() const noexcept;
  // The member of that name, or nullptr.
  const lease* member(std::string_view name) const noexcept;
  // The fencing token of the member of that name (nullopt: no such member, or no fencing backend).
  // Each name fences separately: pass each resource the token of its own name.
  std::optional<std::uint64_t> fencing_token(std::string_view name) const noexcept;
  // The earliest valid_until of the members (min() when empty).
  clock::time_point valid_until() const noexcept;
  std::chrono::milliseconds remaining() const noexcept;  // of the earliest member; 0 when past it

  // Fires once when any member is lost (its renewal failed, its validity ran out, its session
  // died). The other members stay held until the set is released: the holder stops its work and
  // releases (or destroys) the set, as with a single lease.
  std::stop_token lost_token() const noexcept;
  std::error_code lost_reason() const noexcept;  // the first lost member's reason
  // The name of the member whose loss fired lost_token (empty while none was lost).
  std::string lost_member() const;

  // Each member for its own ttl. The first failure is reported; the others are still renewed.
  void renew();
  void renew(std::error_code& ec) noexcept;

  // Releases every member, in reverse canonical order, even after one fails; then reports the
  // first failure (errc::not_owner when a member was no longer ours: the work done under the set
  // was not protected). Releasing an empty or released set does nothing.
  void release();
  void release(std::error_code& ec) noexcept;

 private:
  struct grant;
  std::unique_ptr<grant> grant_;
};

class multi_lock {
 public:
  using clock = std::chrono::steady_clock;

  ~multi_lock();
  multi_lock(const multi_lock&) = delete;
  multi_lock& operator=(const multi_lock&) = delete;

  // The names in the order they are taken: byte order (std::string's <), each once.
  const std::vector<std::string>& names() const noexcept { return names_; }
  std::size_t size() const noexcept { return names_.size(); }
  // The capabilities of each member (the backend's locks).
  capabilities caps() const noexcept;
  const lock_options& options() const noexcept;
  const std::string& owner() const noexcept { return options().owner; }
  // The member lock of each name, in canonical order.
  std::span<const std::unique_ptr<distributed_lock>> member_locks() const noexcept { return members_; }

  // The forms of distributed_lock, for the whole set. Exactly one attempt per member; empty when
  // one was held by someone else (those taken before it are released first).
  [[nodiscard]] multi_lease try_acquire();
  [[nodiscard]] multi_lease try_acquire(std::error_code& ec) noexcept;

  // Waits until the one deadline for the whole set. Empty: a member was still held by someone
  // else then (the others taken are released).
  [[nodiscard]] multi_lease try_acquire_until(clock::time_point deadline);
  [[nodiscard]] multi_lease try_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept;
  template <class Rep, class Period>
  [[nodiscard]] multi_lease try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return try_acquire_until(distributed_lock::deadline_after(timeout));
  }
  template <class Rep, class Period>
  [[nodiscard]] multi_lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), ec);
  }

  // Waits as long as it takes. Never returns an empty set.
  [[nodiscard]] multi_lease acquire();
  [[nodiscard]] multi_lease acquire(std::error_code& ec) noexcept;

  // With a stop token: a stop request ends the wait with std::errc::operation_canceled (thrown as
  // std::system_error by the forms without `ec`), and every member taken is released.
  [[nodiscard]] multi_lease try_acquire_until(clock::time_point deadline, std::stop_token stop);
  [[nodiscard]] multi_lease try_acquire_until(clock::time_point deadline, std::stop_token stop,
                                              std::error_code& ec) noexcept;
  template <class Rep, class Period>
  [[nodiscard]] multi_lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop) {
    return try_acquire_until(distributed_lock::deadline_after(timeout), std::move(stop));
  }
  template <class Rep, class Period>
  [[nodiscard]] multi_lease try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                                            std::error_code& ec) noexcept {
    return try_acquire_until(distributed_lock::deadline_after(timeout), std::move(stop), ec);
  }
  [[nodiscard]] multi_lease acquire(std::stop_token stop);
  [[nodiscard]] multi_lease acquire(std::stop_token stop, std::error_code& ec) noexcept;

 private:
  friend class backend;  // backend::make_multi_lock makes the members
  // `members` in canonical order, distinct names, at least one.
  explicit multi_lock(std::vector<std::unique_ptr<distributed_lock>> members);

  enum class mode { once, until, forever };
  multi_lease take(mode how, clock::time_point deadline, const std::stop_token& stop, std::error_code& ec) noexcept;
  // The backend's one step for the whole set (capability::atomic_set). not_taken: the backend could
  // not take this set in one step (or must not try now); take it member by member.
  enum class one_step { taken, held, failed, not_taken };
  one_step take_in_one_step(multi_lease& whole, std::error_code& ec);

  std::vector<std::unique_ptr<distributed_lock>> members_;
  std::vector<std::string> names_;
};

}  // namespace dlock
