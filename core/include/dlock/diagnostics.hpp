#pragma once
// Errors that happen where nobody can catch them: a lease released in its destructor that turns
// out to be someone else's, a renewal failing in the watchdog thread, an unlock() called by
// std::unique_lock. They are reported here, never dropped. The default handler writes one line to
// stderr; a service installs its own to route them to its logger.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>

namespace dlock {

using background_error_handler = std::function<void(std::error_code, std::string_view message)>;

// Returns the previous handler. An empty handler restores the default (stderr).
background_error_handler set_background_error_handler(background_error_handler handler);
void report_background_error(std::error_code ec, std::string_view message) noexcept;

// How many leases the process-wide watchdog tracks right now (renewals and validity deadlines of
// leases not yet released), and how many timers it has pending. For metrics and leak checks.
struct watchdog_load {
  std::size_t leases = 0;
  std::size_t timers = 0;
  // Since the process started: leases renewed, and the calls that renewed them (a backend that
  // renews in batches renews many leases per call; one that cannot, one).
  std::uint64_t renewals = 0;
  std::uint64_t renewal_calls = 0;
};
watchdog_load current_watchdog_load() noexcept;

}  // namespace dlock
