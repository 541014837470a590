#include "connection.hpp"

namespace dlock::zookeeper {

connection::connection(session_options options, std::string redacted_uri)
    : options_(std::move(options)), redacted_uri_(std::move(redacted_uri)) {}

std::shared_ptr<session> connection::live(std::chrono::steady_clock::time_point deadline, std::string_view waited) {
  std::shared_ptr<session> s;
  {
    std::lock_guard lock(mutex_);
    if (!current_ || current_->expired()) current_ = session::start(options_, redacted_uri_);
    s = current_;
  }
  s->wait_established(deadline, waited);  // outside the mutex: each caller waits until its own deadline
  return s;
}

void connection::discard(const std::shared_ptr<session>& dead) {
  std::lock_guard lock(mutex_);
  if (current_ == dead) current_.reset();
}

}  // namespace dlock::zookeeper
