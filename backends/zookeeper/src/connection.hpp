#pragma once
// The session a backend shares among its locks, replaced after it expires: the C client never
// revives an expired session, so the next lock operation needs a new one.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "session.hpp"

namespace dlock::zookeeper {

class connection {
 public:
  connection(session_options options, std::string redacted_uri);
  // The session, established by `deadline`: a new one is started when there is none or it expired
  // (one that is still being established is waited for, not replaced). Throws dlock::error when
  // none is established by then, saying `waited` ("within 10000ms") for how long.
  std::shared_ptr<session> live(std::chrono::steady_clock::time_point deadline, std::string_view waited);
  // The server said this session is expired before its event reached us: drop it now.
  void discard(const std::shared_ptr<session>& dead);

 private:
  std::mutex mutex_;
  session_options options_;
  std::string redacted_uri_;
  std::shared_ptr<session> current_;
};

}  // namespace dlock::zookeeper
