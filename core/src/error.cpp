#include "dlock/error.hpp"

#include <string>

namespace dlock {
namespace {

class dlock_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::invalid_uri: return "invalid URI";
      case errc::unknown_scheme: return "unknown URI scheme";
      case errc::missing_capability: return "backend lacks a required capability";
      case errc::invalid_name: return "invalid lock name";
      case errc::invalid_argument: return "invalid argument";
      case errc::backend_unavailable: return "backend unavailable";
      case errc::authentication_failed: return "authentication failed";
      case errc::backend_error: return "backend error";
      case errc::timeout: return "timed out waiting for the lock";
      case errc::lock_lost: return "lock lost";
      case errc::not_owner: return "lock is not held by this owner";
      case errc::not_supported: return "not supported by this backend";
      case errc::name_conflict: return "the name is in use as another kind of lock";
    }
    return "unknown dlock error";
  }
};

thread_local std::string last_message;

}  // namespace

const std::error_category& error_category() noexcept {
  static const dlock_category category;
  return category;
}

const std::string& last_error_message() noexcept { return last_message; }
void clear_last_error_message() noexcept { last_message.clear(); }

void set_error(std::error_code& ec, std::error_code value, std::string message) noexcept {
  ec = value;
  try {
    last_message = std::move(message);
  } catch (...) {
    // Out of memory while keeping a message: the code alone still says what failed.
  }
}

void throw_if(const std::error_code& ec) {
  if (!ec) return;
  if (last_message.empty()) throw error(ec, ec.message());
  throw error(ec, last_message);
}

}  // namespace dlock
