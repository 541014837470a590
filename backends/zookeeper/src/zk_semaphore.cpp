#include "zk_semaphore.hpp"

#include <algorithm>
#include <optional>

#include "acquire_errors.hpp"
#include "dlock/error.hpp"
#include "name_conflict.hpp"
#include "name_mapping.hpp"
#include "request.hpp"
#include "sequence.hpp"
#include "zk_lease.hpp"
#include "zk_nodes_lease.hpp"

namespace dlock::zookeeper {

zk_semaphore::zk_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                           std::shared_ptr<connection> conn, node_settings settings)
    : semaphore(std::move(name), max_count, caps, std::move(options)),
      conn_(std::move(conn)),
      settings_(std::move(settings)) {
  folder_ = parent_path(settings_.root, this->name());
  locks_ = folder_ + "/locks";
  leases_ = leases_folder(folder_);
}

// Without the internal mutex. Safe: whoever is granted counted every granted node that existed
// before its own (the newest grant saw all the others), so at most max_count are granted at once,
// mutex or not; Curator's mutex is there so that waiters, whose nodes stay in, do not fill the
// folder beyond max_count together and wait for each other forever. A try's node stays in for one
// read only. It cannot overtake a waiter either: the waiter's nodes are in the count it reads. And
// it is not refused merely because another client is inside the mutex at that instant.
std::unique_ptr<spi::lease_state> zk_semaphore::do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept {
  return acquire_or_error(ec, [&] { return take_leases(permits, clock::now(), false, ec); });
}

std::unique_ptr<spi::lease_state> zk_semaphore::do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                                 std::error_code& ec) noexcept {
  return acquire_in_mutex(permits, deadline, ec);
}

std::unique_ptr<spi::lease_state> zk_semaphore::acquire_in_mutex(std::uint32_t permits, clock::time_point deadline,
                                                                 std::error_code& ec) noexcept {
  return acquire_or_error(ec, [&]() -> std::unique_ptr<spi::lease_state> {
    // A fresh mutex object per attempt: zk_lock is reentrant per object, and two threads of one
    // semaphore must queue at the internal mutex like any two clients.
    zk_lock internal(std::string(name()) + "/locks", options(), conn_, settings_, locks_);
    lease mutex = internal.try_acquire_until(deadline, ec);
    if (!mutex) return nullptr;
    auto granted = take_leases(permits, deadline, true, ec);
    // Released within the acquire's time too. Our leases stand or fall by their own nodes; a mutex
    // node left behind is deleted in the background or goes with its session.
    if (auto* held = dynamic_cast<zk_lease*>(mutex.state().get())) held->release_by(request::answer_deadline(deadline));
    const auto failure = ec;
    const std::string message = failure ? last_error_message() : std::string();
    std::error_code ignored;
    mutex.release(ignored);  // (it clears the thread's last error message: ours is set again)
    if (failure) set_error(ec, failure, message);
    return granted;
  });
}

std::unique_ptr<spi::lease_state> zk_semaphore::take_leases(std::uint32_t permits, clock::time_point deadline,
                                                            bool wait, std::error_code& ec) {
  // No request is waited for past the deadline plus the grace of the last look and the
  // withdrawal (request.hpp), whatever the server does.
  const auto patience = request::answer_deadline(deadline);
  auto s = conn_->live(patience, acquire_waited);
  const std::string what = "semaphore acquire of '" + std::string(name()) + "'";
  std::vector<std::string> ours;  // full paths
  std::vector<std::string> our_names;
  std::int64_t token = 0;
  auto give_up = [&] {
    for (const auto& path : ours) (void)delete_own_node(*s, path, patience);
  };
  for (std::uint32_t i = 0; i < permits; ++i) {
    lock_node_request request{.root = settings_.root,
                              .parent = leases_,
                              .uuid = spi::random_uuid(),
                              .node_name = lease_node_name,
                              .data = owner(),
                              .acl = settings_.creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE};
    lock_node node;
    // No fresh session here: a waiter's internal mutex node lives in this one.
    if (const int rc = create_lock_node(*s, request, patience, node); rc != ZOK) {
      give_up();
      set_zk_error(ec, rc, what + " (create under " + leases_ + ")");
      return nullptr;
    }
    ours.push_back(leases_ + "/" + node.name);
    our_names.push_back(node.name);
    s->own_node_created(ours.back());
    token = std::max(token, node.czxid);  // later nodes, later zxids: the last one's
  }
  std::vector<std::string> children, locks;
  bool final_look = false;
  // One name, one lock (name_conflict.hpp): a mutex or reader-writer lock of the name is looked
  // for once, with the first read of leases/ (both sent at once), after our lease nodes were
  // created. Any node of theirs, holder or waiter, refuses us.
  bool conflict_checked = false;
  for (;;) {
    session::path_watch watch(*s, leases_);  // registered before the watch is set: no event missed
    const auto asked = clock::now();
    std::optional<request::children_request> lock_nodes;
    if (!conflict_checked) lock_nodes.emplace(*s, folder_);
    // A try reads once: no watch (it would only bring a notification of our own release).
    int rc = request::children(*s, leases_, patience, children, wait);
    if (lock_nodes) {
      const int lrc = lock_nodes->wait(patience, locks);
      if (rc == ZOK) rc = lrc;  // the folder exists: leases/ is in it
    }
    if (rc == ZOK) s->heard_from_server(asked);
    if (transient_failure(rc) && ride_out_disconnect(*s, patience)) continue;
    if (rc != ZOK) {
      give_up();
      set_zk_error(ec, rc, what + " (children of " + leases_ + ")");
      return nullptr;
    }
    if (!conflict_checked) {
      if (const auto kind = lock_kind_of(locks); !kind.empty()) {
        give_up();
        const auto count =
            std::count_if(locks.begin(), locks.end(), [](const std::string& c) { return sequence_of(c).has_value(); });
        set_error(ec, errc::name_conflict, in_use_as_lock(name(), kind, static_cast<std::size_t>(count)));
        return nullptr;
      }
      conflict_checked = true;
    }
    for (const auto& name : our_names)
      if (std::find(children.begin(), children.end(), name) == children.end()) {
        give_up();
        set_error(ec, errc::lock_lost,
                  "zookeeper: our lease node " + leases_ + "/" + name + " vanished while waiting (session expired?)");
        return nullptr;
      }
    // Curator's rule: every child of leases/ is a permit held or wanted, ours included.
    if (children.size() <= max_count())
      return zk_nodes_lease::grant(s, std::move(ours), token, std::string(name()), options().ttl);
    if (!wait || final_look) {
      give_up();
      return nullptr;
    }
    if (watch.wait(deadline) == session::path_watch::outcome::deadline) final_look = true;
    if (wait_ended(*s, give_up, what, ec)) return nullptr;
  }
}

}  // namespace dlock::zookeeper
