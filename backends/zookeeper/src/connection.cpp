#include "connection.hpp"

namespace dlock::zookeeper {

connection::connection(session_options options, std::string redacted_uri)
    : options_(std::move(options)), redacted_uri_(std::move(redacted_uri)) {}

std::shared_ptr<session> connection::live() {
  std::lock_guard lock(mutex_);
  if (!current_ || current_->expired()) current_ = session::open(options_, redacted_uri_);
  return current_;
}

void connection::discard(const std::shared_ptr<session>& dead) {
  std::lock_guard lock(mutex_);
  if (current_ == dead) current_.reset();
}

}  // namespace dlock::zookeeper
