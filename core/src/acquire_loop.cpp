#include "acquire_loop.hpp"

#include <optional>
#include <string>

#include "dlock/error.hpp"
#include "watchdog.hpp"

namespace dlock::detail {

void set_canceled(std::error_code& ec, std::string_view what, std::string_view name) noexcept {
  try {
    set_error(ec, std::make_error_code(std::errc::operation_canceled),
              std::string(what) + " '" + std::string(name) + "': the wait was stopped (stop requested on its token)");
  } catch (...) {
    ec = std::make_error_code(std::errc::operation_canceled);  // no memory for the message
  }
}

lease adopt(std::unique_ptr<spi::lease_state> state, const lock_options& options, capabilities caps) noexcept {
  if (!state) return {};
  std::shared_ptr<spi::lease_state> shared(std::move(state));
  std::optional<std::chrono::milliseconds> renew_every;
  if (options.watchdog && caps.has(capability::renewable)) renew_every = options.renew_every.value_or(options.ttl / 3);
  if (renew_every || shared->valid_until() != clock::time_point::max()) {
    try {
      watch_lease(shared, renew_every);
    } catch (...) {
      // No thread could be started: the lease is still valid, but nobody would renew it or tell
      // its holder it ran out. Refuse it rather than hand out an unwatched grant.
      std::error_code ignored;
      shared->release(ignored);
      return {};
    }
  }
  return lease(std::move(shared));
}

}  // namespace dlock::detail
