#include "zk_lock.hpp"

#include <algorithm>
#include <vector>

#include "acquire_errors.hpp"
#include "capabilities.hpp"
#include "dlock/error.hpp"
#include "name_conflict.hpp"
#include "name_mapping.hpp"
#include "queue_read.hpp"
#include "request.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper {

namespace {
// A lock reports its backend's capabilities: the mutex's, plus the offer bits of the primitives.
constexpr capabilities lock_caps = with_primitives(zookeeper_caps, zookeeper_primitives);
}  // namespace

zk_lock::zk_lock(std::string name, lock_options options, std::shared_ptr<connection> conn, node_settings settings,
                 std::string_view node_name)
    : distributed_lock(std::move(name), lock_caps, std::move(options)),
      conn_(std::move(conn)),
      settings_(std::move(settings)),
      parent_(parent_path(settings_.root, this->name())),
      node_name_(node_name),
      semaphore_leases_(leases_folder(parent_)) {}

zk_lock::zk_lock(std::string name, lock_options options, std::shared_ptr<connection> conn, node_settings settings,
                 std::string parent)
    : distributed_lock(std::move(name), lock_caps, std::move(options)),
      conn_(std::move(conn)),
      settings_(std::move(settings)),
      parent_(std::move(parent)) {}

std::unique_ptr<spi::lease_state> zk_lock::do_try_acquire(std::error_code& ec) noexcept {
  return attempt(clock::now(), false, ec);
}

std::unique_ptr<spi::lease_state> zk_lock::do_acquire_until(clock::time_point deadline, std::error_code& ec) noexcept {
  return attempt(deadline, true, ec);
}

std::unique_ptr<spi::lease_state> zk_lock::reenter() {
  std::lock_guard guard(mutex_);
  auto node = held_.lock();
  if (!node) return nullptr;
  std::lock_guard node_guard(node->mutex);
  if (node->count == 0) return nullptr;
  for (auto* other : node->live)
    if (other->lost()) return nullptr;  // a lost grant is not re-entered
  auto l = std::make_unique<zk_lease>(node, std::string(name()), options().ttl, node->s->valid_until());
  ++node->count;
  return l;
}

std::unique_ptr<spi::lease_state> zk_lock::attempt(clock::time_point deadline, bool wait,
                                                   std::error_code& ec) noexcept {
  return acquire_or_error(ec, [&]() -> std::unique_ptr<spi::lease_state> {
    if (auto again = reenter()) return again;
    // Transient failures are ridden out until the deadline; no request is waited for past it plus
    // the grace of the last look and the withdrawal (request.hpp), whatever the server does.
    const auto patience = request::answer_deadline(deadline);
    auto s = conn_->live(patience, acquire_waited);
    lock_node ours;
    if (const int rc = create(s, patience, ours); rc != ZOK) {
      set_zk_error(ec, rc, "acquire of '" + std::string(name()) + "' (create under " + parent_ + ")");
      return nullptr;
    }
    s->own_node_created(parent_ + "/" + ours.name);
    return wait_in_queue(s, ours, deadline, patience, wait, ec);
  });
}

int zk_lock::create(std::shared_ptr<session>& s, clock::time_point patience, lock_node& ours) {
  lock_node_request request{.root = settings_.root,
                            .parent = parent_,
                            .uuid = spi::random_uuid(),
                            .node_name = node_name_,
                            .data = owner(),
                            .acl = settings_.creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE};
  return create_lock_node_in_live_session(*conn_, s, request, patience, ours);
}

std::unique_ptr<spi::lease_state> zk_lock::wait_in_queue(const std::shared_ptr<session>& s, const lock_node& ours,
                                                         clock::time_point deadline, clock::time_point patience,
                                                         bool wait, std::error_code& ec) {
  const std::string our_path = parent_ + "/" + ours.name;
  const std::string what = "acquire of '" + std::string(name()) + "'";
  auto give_up = [&] { (void)delete_own_node(*s, our_path, patience); };
  queue_ahead ahead;
  bool final_look = false;
  // One name, one lock: a semaphore's leases are looked for with the first read of the queue. Not
  // by a semaphore's internal mutex, which has no such folder (semaphore_leases_ is "").
  queue_reader queue(parent_, semaphore_leases_, name(), "a mutex", what);
  for (;;) {
    {  // Read the queue: where our node stands, and the nodes ahead of it.
      const auto ordered = queue.read(*s, patience, ec);
      if (!ordered) {
        give_up();
        return nullptr;
      }
      const auto it = std::find(ordered->begin(), ordered->end(), ours.name);
      if (it == ordered->end()) {
        set_error(ec, errc::lock_lost,
                  "zookeeper: our node " + our_path + " vanished while waiting (session expired?)");
        return nullptr;
      }
      ahead.clear();
      for (auto before = ordered->begin(); before != it; ++before) {
        std::string path = parent_ + "/" + *before;
        const bool own = s->own_node_exists(path);
        ahead.push_back({std::move(path), own});
      }
    }
    if (ahead.empty()) return grant(s, our_path, ours.czxid);
    if (!wait || final_look) {
      give_up();
      return nullptr;
    }
    // Watch only the predecessor: one waiter wakes per release (no herd).
    const std::string predecessor = ahead.back().path;
    session::path_watch watch(*s, predecessor);
    const int rc = request::exists(*s, predecessor, patience, nullptr, true);
    auto outcome = session::path_watch::outcome::deleted;  // ZNONODE: gone before the watch was set
    if (transient_failure(rc) && ride_out_disconnect(*s, patience)) continue;
    if (rc != ZOK && rc != ZNONODE) {
      give_up();
      set_zk_error(ec, rc, what + " (watch " + predecessor + ")");
      return nullptr;
    }
    if (rc == ZOK) outcome = watch.wait(deadline);
    if (wait_ended(*s, give_up, what, ec)) return nullptr;
    if (outcome == session::path_watch::outcome::deadline) {
      final_look = true;  // one last look at the deadline
      continue;
    }
    if (outcome != session::path_watch::outcome::deleted) continue;  // read the queue again
    // The predecessor is gone. If every other node that was ahead of ours is a node of this
    // session whose delete the server has since answered, nothing is ahead of us any more (a node
    // created after our read has a higher sequence number than ours): the grant needs no
    // get_children. Any other node ahead (another client's, or ours not known deleted) may still
    // be there, as when a waiter between it and us gave up: read the queue again, as Curator and
    // kazoo always do.
    // A grant's validity is measured from the last request the server answered (session.hpp).
    // After a wait longer than the session timeout, the fast path's grant would arrive with none
    // left, be given back, and our place lost to the next waiter: read the queue (which renews it).
    if (all_known_gone(*s, ahead, predecessor) && s->valid_until() - clock::now() > s->session_timeout() / 2)
      return grant(s, our_path, ours.czxid);
  }
}

bool zk_lock::all_known_gone(const session& s, const queue_ahead& ahead, const std::string& deleted) {
  return std::all_of(ahead.begin(), ahead.end(),
                     [&](const node_ahead& n) { return n.path == deleted || (n.own && !s.own_node_exists(n.path)); });
}

std::unique_ptr<spi::lease_state> zk_lock::grant(const std::shared_ptr<session>& s, const std::string& path,
                                                 std::int64_t czxid) {
  auto node = std::make_shared<held_node>();
  node->s = s;
  node->path = path;
  node->czxid = czxid;
  node->count = 1;
  // The lease exists before its node is watched: a loss from the first instant reaches it.
  auto l = std::make_unique<zk_lease>(node, std::string(name()), options().ttl, s->valid_until());
  std::weak_ptr<held_node> weak_node = node;
  s->watch_node(
      path,
      [weak_node](std::error_code reason) {
        if (auto n = weak_node.lock()) {
          std::lock_guard guard(n->mutex);
          const auto live = n->live;  // mark_lost may run callbacks that release and unregister
          for (auto* l : live) l->mark_lost(reason);
        }
      },
      [weak_node](clock::time_point until) {
        if (auto n = weak_node.lock()) {
          std::lock_guard guard(n->mutex);
          for (auto* l : n->live) l->extend_to(until);
        }
      });
  // The node itself: a deletion from outside (an operator, break_lock) is a lost lock. Not waited
  // for: acquire + release costs 3 round trips of latency (create, get_children, delete) + 1 pipelined.
  s->watch_own_node(path);
  std::lock_guard guard(mutex_);
  held_ = node;
  return l;
}

}  // namespace dlock::zookeeper
