#pragma once
// Errors: one exception type, categorised by std::error_code (the Asio / SOCI way).
// Contention is never an error: try_* return an empty lease. Everything here is a real failure.
#include <string>
#include <system_error>

namespace dlock {

enum class errc {
  invalid_uri = 1,        // malformed URI, bad parameter value, unknown parameter
  unknown_scheme,         // no backend registered (or loadable) for the scheme
  missing_capability,     // open(uri, required) and the backend lacks some of `required`
  invalid_name,           // empty, oversized or otherwise unusable lock name
  invalid_argument,       // a bad argument that is not a URI or a name (e.g. a zero ttl)
  backend_unavailable,    // cannot connect, connection dropped, I/O timeout
  authentication_failed,  // the server refused our credentials
  backend_error,          // the server answered, but not as the protocol says it should
  timeout,                // acquire()/acquire_until gave up waiting (try_* return an empty lease)
  lock_lost,              // the lease expired or its session died
  not_owner,              // release/renew found the lock gone or held by someone else
  not_supported,          // the backend cannot do this (e.g. renew on a non-renewable lock)
  name_conflict,          // the server keeps this name as something this request cannot share: a
                          // semaphore against a mutex or reader-writer lock of the same name, or a
                          // semaphore of another size or of a layout that records no holders
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

class error : public std::system_error {
 public:
  error(errc e, const std::string& what) : std::system_error(make_error_code(e), what), detail_(what) {}
  error(std::error_code ec, const std::string& what) : std::system_error(ec, what), detail_(what) {}
  // The message without the ": <category message>" suffix that what() appends: what to pass on
  // when re-reporting this error through an error_code overload.
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string detail_;
};

// The error_code overloads cannot carry a message in std::error_code itself, so the last detailed
// message of a failed call on this thread is kept here (Asio keeps none; SOCI keeps it in the
// exception). Passwords never reach it: only redacted URIs are ever formatted into messages.
const std::string& last_error_message() noexcept;
// Called at the start of every public operation so a message never outlives its error.
void clear_last_error_message() noexcept;

// Throws dlock::error with last_error_message() when ec is set. Used by the throwing overloads.
void throw_if(const std::error_code& ec);

// Sets ec and the thread's last_error_message() in one step. For backends and the core.
void set_error(std::error_code& ec, std::error_code value, std::string message) noexcept;
inline void set_error(std::error_code& ec, errc value, std::string message) noexcept {
  set_error(ec, make_error_code(value), std::move(message));
}

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
