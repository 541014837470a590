#include "dlock/diagnostics.hpp"

#include <cstdio>
#include <mutex>
#include <string>

namespace dlock {
namespace {

std::mutex handler_mutex;
background_error_handler& handler() {
  static background_error_handler h;
  return h;
}

}  // namespace

background_error_handler set_background_error_handler(background_error_handler h) {
  std::lock_guard guard(handler_mutex);
  auto previous = std::move(handler());
  handler() = std::move(h);
  return previous;
}

void report_background_error(std::error_code ec, std::string_view message) noexcept {
  try {
    background_error_handler h;
    {
      std::lock_guard guard(handler_mutex);
      h = handler();
    }
    if (h) {
      h(ec, message);
      return;
    }
    const std::string line = "dlock: " + std::string(message) + " (" + ec.message() + ")\n";
    std::fputs(line.c_str(), stderr);
  } catch (...) {
    // A handler that throws must not take down the watchdog thread or a destructor.
  }
}

}  // namespace dlock
