#include "dlock/backend.hpp"

#include "dlock/error.hpp"
#include "dlock/spi.hpp"
#include "local_wait_queue.hpp"

namespace dlock {

backend::backend(capabilities caps, lock_scope scope, name_limits limits, lock_options defaults, std::string redacted_uri)
    : caps_(caps),
      scope_(scope),
      limits_(limits),
      defaults_(std::move(defaults)),
      redacted_uri_(std::move(redacted_uri)),
      wait_lines_(std::make_shared<detail::local_wait_queues>()) {}

backend::~backend() = default;

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name) { return make_lock(name, defaults_); }

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, std::error_code& ec) noexcept {
  return make_lock(name, defaults_, ec);
}

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, lock_options options) {
  std::error_code ec;
  auto lock = make_lock(name, std::move(options), ec);
  throw_if(ec);
  return lock;
}

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, lock_options options,
                                                     std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  const std::string limit = "1 to " + std::to_string(limits_.max_length) + " bytes";
  if (name.empty()) {
    set_error(ec, errc::invalid_name, "lock name is empty; " + redacted_uri_ + " accepts names of " + limit);
    return nullptr;
  }
  if (name.size() > limits_.max_length) {
    set_error(ec, errc::invalid_name, "lock name of " + std::to_string(name.size()) + " bytes is too long; " + redacted_uri_ + " accepts names of " + limit);
    return nullptr;
  }
  check_lock_options(options, ec);
  if (ec) return nullptr;
  try {
    if (options.owner.empty()) options.owner = spi::default_owner_id();
    auto lock = do_make_lock(std::string(name), std::move(options));
    if (!lock) {
      set_error(ec, errc::backend_error, "backend " + redacted_uri_ + " made no lock");
      return lock;
    }
    // Keyed by the lock's own name: a backend that wraps another one's lock names it the same.
    if (!lock->line_) lock->line_ = wait_lines_->for_name(std::string(lock->name()));
    return lock;
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
  return nullptr;
}

void check_lock_options(const lock_options& options, std::error_code& ec) noexcept {
  ec.clear();
  if (options.ttl <= std::chrono::milliseconds::zero() || options.ttl > longest_duration)
    return set_error(ec, errc::invalid_argument, "ttl must be from 1ms to " + format_duration(longest_duration) + " (10 years), got " + format_duration(options.ttl));
  if (options.renew_every && (*options.renew_every <= std::chrono::milliseconds::zero() || *options.renew_every >= options.ttl))
    return set_error(ec, errc::invalid_argument, "renew period must be positive and shorter than the ttl (" + format_duration(options.ttl) + ")");
  if (options.poll.min <= std::chrono::milliseconds::zero() || options.poll.max < options.poll.min ||
      options.poll.max > longest_duration)
    return set_error(ec, errc::invalid_argument,
                     "poll backoff must satisfy 0 < min <= max <= " + format_duration(longest_duration));
}

std::size_t backend::sweep_expired() {
  std::error_code ec;
  const auto n = sweep_expired(ec);
  throw_if(ec);
  return n;
}

std::size_t backend::sweep_expired(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  return do_sweep_expired(ec);
}

std::size_t backend::do_sweep_expired(std::error_code& ec) noexcept {
  ec.clear();
  return 0;
}

std::string backend::sweep_target() const { return do_sweep_target(); }

std::string backend::do_sweep_target() const { return {}; }

}  // namespace dlock
