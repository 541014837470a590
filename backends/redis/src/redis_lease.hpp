#pragma once
// One grant of the mutex of redis://, redis+reentrant:// or redis+fair:// (and their Sentinel and
// Cluster schemes), and the script call that undoes one.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "backend_state.hpp"
#include "dlock/spi.hpp"
#include "redis_settings.hpp"
#include "renewal.hpp"
#include "script_call.hpp"

namespace dlock::redis {

// Undoes one grant (one hold in the Redisson layouts) of `key` by `owner` (the token, or the owner
// field): compare-and-delete, publishing the release to the mutex's waiters and to the name's
// reader-writer lock waiters. The lease's release and the clean-up of a grant whose reply was lost
// both use it.
script_call release_call(const settings& cfg, const std::string& name, const std::string& key, const std::string& owner,
                         std::chrono::milliseconds ttl);

// One grant. Simple mode: the token on the STRING key. Reentrant: one hold of the owner field.
class redis_lease final : public spi::lease_state {
 public:
  redis_lease(std::shared_ptr<backend_state> s, std::string name, std::string key, std::string secret,
              std::chrono::milliseconds ttl, std::chrono::steady_clock::time_point start, std::uint64_t fencing);
  ~redis_lease() override;

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fencing_; }
  spi::renewal_batch* batch() const noexcept override { return state_->renewals.get(); }

  // For renew_in_one_pipeline (renewal.hpp), and do_renew.
  void judge_renewal(const redisReply& r, std::error_code& ec) const { judge_renewal_reply(r, what(), ec); }
  void judge_replicas(const redisReply* wait_reply, std::error_code& ec) const {
    judge_renewal_replicas(*state_, wait_reply, what(), ec);
  }
  renewal_request renewal(const std::string& ttl_text) const { return {&renew_script(), {key_}, renew_args(ttl_text)}; }
  // A release or renewal waits for a pooled connection while the grant is valid: after that it
  // is moot, and before it giving up would leave the lock taken until its ttl.
  std::chrono::steady_clock::time_point connection_deadline() const noexcept {
    return std::max(valid_until(), std::chrono::steady_clock::now() + state_->config.where.connect_timeout);
  }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

  // The renewal script and its arguments for this grant.
  const script& renew_script() const noexcept;
  std::vector<std::string_view> renew_args(const std::string& ttl_text) const {
    if (state_->config.lock_mode == mode::simple) return {secret_, ttl_text};
    return {ttl_text, secret_};
  }

 private:
  std::string what() const { return "lock '" + name() + "'"; }

  std::shared_ptr<backend_state> state_;
  std::string key_, secret_;
  std::uint64_t fencing_;
  std::uint64_t held_id_;
};

}  // namespace dlock::redis
