#pragma once
// The etcd v3 JSON gateway over HTTP/1.1 (libcurl): one POST per call, to the members of the URI in
// turn. A member that refuses the connection, drops it or answers "unavailable" is skipped and the
// call goes to the next; the member that answered last is asked first next time. With a user in the
// URI, the gateway's token (/v3/auth/authenticate) rides in the Authorization header, and is fetched
// again when the server says it expired. The password is kept here only and never formatted into a
// message.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlock::etcd {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

std::string base64_encode(std::string_view bytes);
std::string base64_decode(std::string_view text);

// An etcd int64 as the gateway writes it: a JSON string ("42"), or absent for zero.
std::int64_t int64_field(const json& object, const char* key);

struct gateway_options {
  std::vector<std::string> endpoints;  // "host:port"
  std::string user;                    // empty: no authentication
  std::string password;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{5000};
};

// What a watch for a key's deletion ended with.
enum class watch_end { deleted, deadline, stopped };

class gateway {
 public:
  explicit gateway(gateway_options options);
  ~gateway();
  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  // POST `body` to `path` (/v3/kv/range, ...) and return the answer. Throws dlock::error:
  // backend_unavailable when no member answered, authentication_failed, backend_error for an error
  // the server answered with.
  json call(const std::string& path, const json& body);

  // Waits until `key` is deleted at or after revision `from` (a watch from that revision), `until`
  // passes or this thread's acquire is asked to stop. `between` runs about every `every` while the
  // watch waits (the waiter's lease keep-alive); a throw from it ends the wait. Throws as call().
  watch_end wait_deleted(const std::string& key, std::int64_t from, steady::time_point until,
                         std::chrono::milliseconds every, const std::function<void()>& between);
  // The same for the deletion of any key in [key, range_end).
  watch_end wait_deleted_in(const std::string& key, const std::string& range_end, std::int64_t from,
                            steady::time_point until, std::chrono::milliseconds every,
                            const std::function<void()>& between);

  const gateway_options& options() const noexcept { return options_; }

 private:
  struct handle;
  std::unique_ptr<handle> borrow();
  void give_back(std::unique_ptr<handle> h);
  std::string token();  // the current auth token ("" without a user)
  std::string authenticate(const std::string& endpoint);
  void forget_token(const std::string& stale);

  gateway_options options_;
  std::atomic<std::size_t> preferred_{0};  // the member that answered last
  std::mutex mutex_;
  std::vector<std::unique_ptr<handle>> idle_;  // easy handles with their connections, for reuse
  std::string token_;
};

}  // namespace dlock::etcd
