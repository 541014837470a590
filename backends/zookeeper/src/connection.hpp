#pragma once
// The session a backend shares among its locks, replaced after it expires: the C client never
// revives an expired session, so the next lock operation needs a new one.
#include <memory>
#include <mutex>
#include <string>

#include "session.hpp"

namespace dlock::zookeeper {

class connection {
 public:
  connection(session_options options, std::string redacted_uri);
  std::shared_ptr<session> live();  // throws dlock::error
  // The server said this session is expired before its event reached us: drop it now.
  void discard(const std::shared_ptr<session>& dead);

 private:
  std::mutex mutex_;
  session_options options_;
  std::string redacted_uri_;
  std::shared_ptr<session> current_;
};

}  // namespace dlock::zookeeper
