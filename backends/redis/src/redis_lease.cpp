#include "redis_lease.hpp"

#include <algorithm>

#include "redis_keys.hpp"
#include "scripts.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

script_call release_call(const settings& cfg, const std::string& name, const std::string& key, const std::string& owner,
                         milliseconds ttl) {
  auto k = keys_for(cfg.prefix, cfg.lock_mode, name);
  if (cfg.lock_mode == mode::simple)
    return {&scripts::simple_release, {key, std::move(k.channel), std::move(k.rw_channel)}, {owner}};
  if (cfg.lock_mode == mode::reentrant)
    return {&scripts::reentrant_release,
            {key, std::move(k.channel), std::move(k.rw_channel)},
            {"0", ms_text(ttl), owner, std::string(publish_command(cfg))}};
  return {&scripts::fair_release,
          {key, std::move(k.queue), std::move(k.timeout), std::move(k.channel), std::move(k.rw_channel)},
          {"0", ms_text(ttl), owner, now_ms(), std::string(publish_command(cfg))}};
}

redis_lease::redis_lease(std::shared_ptr<backend_state> s, std::string name, std::string key, std::string secret,
                         milliseconds ttl, clock::time_point start, std::uint64_t fencing)
    : lease_state(std::move(name), ttl, validity_after(start, ttl)),
      state_(std::move(s)),
      key_(std::move(key)),
      secret_(std::move(secret)),
      fencing_(fencing),
      held_id_(state_->add_held(this, key_, secret_)) {
  // Watch the server from now on: its subscriber connection notices a stop or a restart at
  // once, and the held leases are then checked without waiting for their next renewal.
  state_->watch_server_of(key_);
}

redis_lease::~redis_lease() { state_->remove_held(held_id_); }

void redis_lease::do_release(std::error_code& ec) noexcept {
  const auto& cfg = state_->config;
  reply_ptr r;
  try {
    const auto call = release_call(cfg, name(), key_, secret_, ttl());
    auto out =
        state_->eval(*call.s, call.key_views(), call.arg_views(), connection_deadline(), milliseconds::zero(), ec);
    if (out.withdrawn) set_withdrawn_error(ec, *state_, "releasing lock '" + name() + "'");
    r = std::move(out.reply);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory releasing");
    return;
  }
  if (ec) return;
  const bool ours = cfg.lock_mode == mode::simple ? (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
                                                  : r->type == REDIS_REPLY_INTEGER;
  if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {
    set_error(ec, errc::backend_error, "redis: releasing lock '" + name() + "': " + std::string(error_text(r.get())));
  } else if (!ours) {
    set_error(ec, errc::not_owner,
              "redis: lock '" + name() +
                  "' was no longer ours at release (it expired or was deleted, and may "
                  "belong to someone else now); the work done under it was not protected");
  }
}

void redis_lease::do_renew(milliseconds ttl, std::error_code& ec) noexcept {
  renew_alone(*state_, *this, ttl, ec,
              [&](std::error_code& e) { set_withdrawn_error(e, *state_, "renewing lock '" + name() + "'"); });
}

const script& redis_lease::renew_script() const noexcept {
  return state_->config.lock_mode == mode::simple ? scripts::simple_renew : scripts::reentrant_renew;
}

}  // namespace dlock::redis
