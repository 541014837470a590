#include "zk_rw_lock.hpp"

#include <algorithm>
#include <vector>

#include "acquire_errors.hpp"
#include "dlock/error.hpp"
#include "name_conflict.hpp"
#include "name_mapping.hpp"
#include "queue_read.hpp"
#include "request.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"
#include "zk_nodes_lease.hpp"

namespace dlock::zookeeper {

std::string blocking_node(access side, const std::vector<std::string>& ordered, const std::string& ours) {
  const auto it = std::find(ordered.begin(), ordered.end(), ours);
  if (it == ordered.begin() || it == ordered.end()) return {};
  if (side == access::write) return *(it - 1);
  // Curator's reader looks for the first write node ahead and watches that one; we watch the
  // nearest, so a release of an earlier writer does not wake the readers queued behind a later one.
  // Either way the queue is read again after the wake-up, so the grant rule is the same.
  for (auto before = it; before != ordered.begin();) {
    --before;
    if (!is_read_node(*before)) return *before;
  }
  return {};
}

zk_rw_lock::zk_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<connection> conn,
                       node_settings settings)
    : rw_lock(std::move(name), caps, std::move(options)),
      conn_(std::move(conn)),
      settings_(std::move(settings)),
      parent_(parent_path(settings_.root, this->name())) {}

std::unique_ptr<spi::lease_state> zk_rw_lock::do_try_acquire(access side, std::error_code& ec) noexcept {
  return attempt(side, clock::now(), false, ec);
}

std::unique_ptr<spi::lease_state> zk_rw_lock::do_acquire_until(access side, clock::time_point deadline,
                                                               std::error_code& ec) noexcept {
  return attempt(side, deadline, true, ec);
}

std::unique_ptr<spi::lease_state> zk_rw_lock::attempt(access side, clock::time_point deadline, bool wait,
                                                      std::error_code& ec) noexcept {
  return acquire_or_error(ec, [&]() -> std::unique_ptr<spi::lease_state> {
    // Transient failures are ridden out until the deadline; no request is waited for past it plus
    // the grace of the last look and the withdrawal (request.hpp), whatever the server does.
    const auto patience = request::answer_deadline(deadline);
    auto s = conn_->live(patience, acquire_waited);
    lock_node_request request{.root = settings_.root,
                              .parent = parent_,
                              .uuid = spi::random_uuid(),
                              .node_name = side == access::read ? read_node_name : write_node_name,
                              .data = owner(),
                              .acl = settings_.creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE};
    lock_node ours;
    if (const int rc = create_lock_node_in_live_session(*conn_, s, request, patience, ours); rc != ZOK) {
      set_zk_error(
          ec, rc,
          std::string(to_string(side)) + " acquire of '" + std::string(name()) + "' (create under " + parent_ + ")");
      return nullptr;
    }
    s->own_node_created(parent_ + "/" + ours.name);
    return wait_in_queue(side, s, ours, deadline, patience, wait, ec);
  });
}

std::unique_ptr<spi::lease_state> zk_rw_lock::wait_in_queue(access side, const std::shared_ptr<session>& s,
                                                            const lock_node& ours, clock::time_point deadline,
                                                            clock::time_point patience, bool wait,
                                                            std::error_code& ec) {
  const std::string our_path = parent_ + "/" + ours.name;
  const std::string what = std::string(to_string(side)) + " acquire of '" + std::string(name()) + "'";
  auto give_up = [&] { (void)delete_own_node(*s, our_path, patience); };
  bool final_look = false;
  // One name, one lock: a semaphore's leases are looked for with the first read of the queue.
  queue_reader queue(parent_, leases_folder(parent_), name(), side == access::read ? "a read lock" : "a write lock",
                     what);
  for (;;) {
    const auto ordered = queue.read(*s, patience, ec);
    if (!ordered) {
      give_up();
      return nullptr;
    }
    if (std::find(ordered->begin(), ordered->end(), ours.name) == ordered->end()) {
      set_error(ec, errc::lock_lost, "zookeeper: our node " + our_path + " vanished while waiting (session expired?)");
      return nullptr;
    }
    const auto blocker = blocking_node(side, *ordered, ours.name);
    if (blocker.empty()) return zk_nodes_lease::grant(s, {our_path}, ours.czxid, std::string(name()), options().ttl);
    if (!wait || final_look) {
      give_up();
      return nullptr;
    }
    // Watch only the node that blocks us, then read the queue again whatever happened to it: a
    // reader's blocker may be gone while an earlier exclusive node (one that gave up later) is not.
    const std::string blocker_path = parent_ + "/" + blocker;
    session::path_watch watch(*s, blocker_path);
    const int rc = request::exists(*s, blocker_path, patience, nullptr, true);
    if (transient_failure(rc) && ride_out_disconnect(*s, patience)) continue;
    if (rc != ZOK && rc != ZNONODE) {
      give_up();
      set_zk_error(ec, rc, what + " (watch " + blocker_path + ")");
      return nullptr;
    }
    const auto outcome = rc == ZOK ? watch.wait(deadline) : session::path_watch::outcome::deleted;
    if (wait_ended(*s, give_up, what, ec)) return nullptr;
    if (outcome == session::path_watch::outcome::deadline) final_look = true;  // one last look at the deadline
  }
}

}  // namespace dlock::zookeeper
