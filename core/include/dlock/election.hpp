#pragma once
// election: leader election among the candidates of one name on one backend.
//
//   auto vote = backend->make_election("scheduler");
//   auto leading = vote->campaign();              // blocks until this candidate leads
//   std::stop_callback demoted(leading.demoted_token(), [] { stop_leading(); });
//   write_to_storage(job, leading.term());        // storage rejects smaller terms
//   leading.resign();                             // the next candidate may lead
//
// Leadership is a lease of the lock of the election's name: the election is that lock, so a
// candidate of `dlock elect URI NAME` and one made here with the same NAME compete with each other
// (and with `dlock run URI NAME`). Its term is the lease's fencing token, which strictly increases
// with each new leader; its demotion token is the lease's lost token, which fires when the grant is
// gone. backend::make_election therefore needs the capabilities fencing and lost_notification.
// What a term does not give: a leader stopped (SIGSTOP, a long GC pause) past its ttl learns of
// its demotion only when it runs again, while a newer leader may already work; a resource that
// rejects writes of a smaller term than it has seen is the defence there (Kleppmann's fencing).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/distributed_lock.hpp"
#include "dlock/lease.hpp"

namespace dlock {

class backend;

// Who leads now, as the server records it (backend::inspect of the election's name).
struct leader_info {
  bool elected = false;  // someone leads now
  // The leader's candidate id (its lock_options::owner), or what the server records in its place
  // (a session or connection id, a grant's random token; see the inspection table in the README).
  std::string id;
  std::optional<std::uint64_t> term;  // where the server's layout records the fencing token
  std::optional<std::chrono::system_clock::time_point> since;
};

// The proof of leading: move-only; destroying a leading leadership resigns.
class leadership {
 public:
  using clock = std::chrono::steady_clock;

  leadership() noexcept = default;
  leadership(lease held, std::string id) noexcept;
  leadership(leadership&&) noexcept = default;
  leadership& operator=(leadership&&) noexcept = default;  // resigns the leadership it overwrites

  explicit operator bool() const noexcept { return static_cast<bool>(lease_); }
  // Elected, not resigned, not known to be demoted, and before valid_until.
  bool leading() const noexcept { return lease_.held(); }
  // Strictly greater than every earlier leader's term of this election (0 for an empty one).
  std::uint64_t term() const noexcept { return lease_.fencing_token().value_or(0); }
  const std::string& id() const noexcept { return id_; }
  std::string_view name() const noexcept { return lease_.name(); }
  // Fires when the leadership is gone (resigned, expired, broken, the session died): before
  // another candidate can be elected on backends whose lost notification says so (the README's
  // `dlock compare` table shows where it does under each fault).
  std::stop_token demoted_token() const noexcept { return lease_.lost_token(); }
  std::error_code demoted_reason() const noexcept { return lease_.lost_reason(); }
  clock::time_point valid_until() const noexcept { return lease_.valid_until(); }

  // Gives the leadership up. Throws errc::not_owner when it had already been lost: the work done
  // as leader was not protected. Resigning an empty or resigned leadership does nothing.
  void resign() { lease_.release(); }
  void resign(std::error_code& ec) noexcept { lease_.release(ec); }

  // The lease of the election's lock underneath (renew, remaining, adapters).
  lease& grant() noexcept { return lease_; }
  const lease& grant() const noexcept { return lease_; }

 private:
  lease lease_;
  std::string id_;
};

class election {
 public:
  using clock = std::chrono::steady_clock;

  election(std::shared_ptr<backend> owner, std::unique_ptr<distributed_lock> lock) noexcept;
  election(const election&) = delete;
  election& operator=(const election&) = delete;
  ~election();

  std::string_view name() const noexcept { return lock_->name(); }
  // This candidate's id: the lock_options::owner it was made with.
  const std::string& id() const noexcept { return lock_->owner(); }

  // The lock's acquire forms: one try, until a deadline, for ever; with a stop token where they
  // wait (a stop request: empty leadership and std::errc::operation_canceled). An empty
  // leadership from try/until means another candidate leads.
  [[nodiscard]] leadership try_campaign();
  [[nodiscard]] leadership try_campaign(std::error_code& ec) noexcept;
  [[nodiscard]] leadership campaign_until(clock::time_point deadline, std::stop_token stop = {});
  [[nodiscard]] leadership campaign_until(clock::time_point deadline, std::stop_token stop,
                                          std::error_code& ec) noexcept;
  template <class Rep, class Period>
  [[nodiscard]] leadership campaign_for(std::chrono::duration<Rep, Period> timeout, std::stop_token stop = {}) {
    return campaign_until(distributed_lock::deadline_after(timeout), std::move(stop));
  }
  [[nodiscard]] leadership campaign(std::stop_token stop = {});
  [[nodiscard]] leadership campaign(std::stop_token stop, std::error_code& ec) noexcept;

  // Who leads now (any candidate, this one included). Refused with errc::not_supported where the
  // backend cannot inspect a lock (see backend::inspect).
  leader_info leader();
  leader_info leader(std::error_code& ec) noexcept;

  // For adapters (the asynchronous campaign acquires this lock as a leadership's lease).
  distributed_lock& lock() noexcept { return *lock_; }

 private:
  std::shared_ptr<backend> backend_;
  std::unique_ptr<distributed_lock> lock_;
};

}  // namespace dlock
