#include "queue_read.hpp"

#include <optional>
#include <utility>

#include "dlock/error.hpp"
#include "name_conflict.hpp"
#include "request.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper {

queue_reader::queue_reader(std::string parent, std::string semaphore_leases, std::string_view name,
                           std::string_view asked, std::string what)
    : parent_(std::move(parent)),
      semaphore_leases_(std::move(semaphore_leases)),
      name_(name),
      asked_(asked),
      what_(std::move(what)) {}

std::optional<std::vector<std::string>> queue_reader::read(session& s, std::chrono::steady_clock::time_point patience,
                                                           std::error_code& ec) {
  std::vector<std::string> children, leases;
  int rc = ZOK;
  do {
    const auto asked = std::chrono::steady_clock::now();
    std::optional<request::children_request> semaphore;  // sent first: both in flight at once
    if (!semaphore_leases_.empty()) semaphore.emplace(s, semaphore_leases_);
    rc = request::children_request(s, parent_).wait(patience, children);
    if (semaphore) {
      const int lrc = semaphore->wait(patience, leases);
      if (rc == ZOK && lrc != ZNONODE) rc = lrc;  // no folder: no semaphore
      if (lrc == ZNONODE) leases.clear();
    }
    if (rc == ZOK) s.heard_from_server(asked);  // the validity of a grant is measured from here
  } while (transient_failure(rc) && ride_out_disconnect(s, patience));
  if (rc != ZOK) {
    set_zk_error(ec, rc, what_ + " (children of " + parent_ + ")");
    return std::nullopt;
  }
  if (!leases.empty()) {
    set_error(ec, errc::name_conflict, in_use_as_semaphore(name_, leases.size(), asked_));
    return std::nullopt;
  }
  semaphore_leases_.clear();  // looked at once, after our node was created: enough (name_conflict.hpp)
  return lock_nodes_in_order(children);
}

}  // namespace dlock::zookeeper
