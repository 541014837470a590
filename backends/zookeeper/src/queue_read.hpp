#pragma once
// The reads of a lock's queue while an acquirer of the mutex or of either side of the
// reader-writer lock waits in it. The first read also looks for a semaphore of the same name
// (name_conflict.hpp), in the same round trip.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "session.hpp"

namespace dlock::zookeeper {

class queue_reader {
 public:
  // The queue folder `parent` of lock `name`; `semaphore_leases`, the leases/ folder of a semaphore
  // of that name, or "" for a lock that is a semaphore's own. `asked`, what the acquirer is, for
  // the conflict's message ("a mutex", "a read lock"); `what`, the acquire, for other errors.
  queue_reader(std::string parent, std::string semaphore_leases, std::string_view name, std::string_view asked,
               std::string what);

  // The lock nodes of the queue in their order (sequence.hpp), with the session's validity moved
  // forward; a dropped connection is ridden out until `patience`. nullopt with ec set when the
  // read failed, or found a semaphore of the name holding or waiting (name_conflict).
  std::optional<std::vector<std::string>> read(session& s, std::chrono::steady_clock::time_point patience,
                                               std::error_code& ec);

 private:
  std::string parent_;
  std::string semaphore_leases_;  // "" once looked at
  std::string name_;
  std::string asked_;
  std::string what_;
};

}  // namespace dlock::zookeeper
