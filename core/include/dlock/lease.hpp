#pragma once
// lease: the proof of holding a lock. Move-only RAII: destroying a held lease releases it.
// An empty lease means "not acquired" (contention), never an error.
//
// Ownership belongs to the lease, not to a thread: any thread may renew or release it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <system_error>

namespace dlock {

namespace spi {
class lease_state;
}

class lease {
 public:
  using clock = std::chrono::steady_clock;

  lease() noexcept = default;
  explicit lease(std::shared_ptr<spi::lease_state> state) noexcept;
  lease(lease&&) noexcept = default;
  lease& operator=(lease&& other) noexcept;  // releases the lease it overwrites
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  // Best-effort release. Never throws; a failure (not_owner: the lock had already gone to someone
  // else) is reported through dlock::report_background_error, never dropped silently.
  ~lease();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  // Acquired, not released, not known to be lost, and before valid_until (on the steady clock).
  bool held() const noexcept;

  std::string_view name() const noexcept;
  // Strictly increasing per grant of a name, for fencing backends; nullopt otherwise. Pass it to
  // the protected resource and have the resource reject smaller tokens (Kleppmann's fix).
  std::optional<std::uint64_t> fencing_token() const noexcept;
  // After this instant the server may have given the lock to someone else. max() if it never expires.
  clock::time_point valid_until() const noexcept;
  std::chrono::milliseconds remaining() const noexcept;  // 0 when past valid_until

  // Fires when the grant is gone: renewal failed, validity ran out, or the session died.
  //   std::stop_callback on_lost(lease.lost_token(), [] { abort_the_work(); });
  std::stop_token lost_token() const noexcept;
  std::error_code lost_reason() const noexcept;  // errc::lock_lost or not_owner once lost

  void renew();  // for the lease's own ttl
  void renew(std::chrono::milliseconds ttl);
  void renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept;

  // Throws errc::not_owner when the lock was no longer ours: the work done under it was not
  // protected, and the caller must know. Releasing an empty or released lease does nothing.
  void release();
  void release(std::error_code& ec) noexcept;

  // For adapters and backends: the shared state (nullptr when empty).
  const std::shared_ptr<spi::lease_state>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<spi::lease_state> state_;
};

}  // namespace dlock
