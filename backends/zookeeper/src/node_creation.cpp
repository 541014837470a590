#include "node_creation.hpp"

#include <vector>

#include "dlock/spi.hpp"
#include "request.hpp"
#include "sequence.hpp"

namespace dlock::zookeeper {

namespace {

using clock = std::chrono::steady_clock;

// Persistent nodes for the root, container nodes for the name's folders (removed by the server
// once empty; Curator's creatingParentContainersIfNeeded makes the same).
int ensure_parents(session& s, const lock_node_request& r, clock::time_point deadline) {
  std::string path;
  std::size_t at = 1;
  while (at <= r.root.size()) {
    const auto next = r.root.find('/', at);
    path = r.root.substr(0, next == std::string::npos ? r.root.size() : next);
    const int rc = request::create(s, path, {}, r.acl, ZOO_PERSISTENT, deadline);
    if (rc != ZOK && rc != ZNODEEXISTS) return rc;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  // "<root>/orders/42": "<root>/orders", then the parent itself.
  for (auto slash = r.parent.find('/', r.root.size() + 1);; slash = r.parent.find('/', slash + 1)) {
    const auto folder = r.parent.substr(0, slash);
    const int rc = request::create(s, folder, {}, r.acl, ZOO_CONTAINER, deadline);
    if (rc != ZOK && rc != ZNODEEXISTS) return rc;
    if (slash == std::string::npos) return ZOK;
  }
}

// Protected create (Curator's rule): the node name carries our UUID, so after a lost reply we look
// for it among the children before creating again; a second node of ours would sit in the queue,
// held by our live session, and block the name until the process exits.
class protected_create {
 public:
  enum class state {
    // Create "<parent>/_c_<uuid>-lock-" ephemeral sequential. The first state, and the one to go
    // back to whenever we know no node of ours exists.
    create,
    // The create said "no node": the parent is missing (first use of the name, or the server's
    // container sweep removed it empty). Make it and create again, a few times at most: another
    // client's sweep could race us, but not forever.
    make_parents,
    // A create's reply was lost: it may have been applied. Find our node by its UUID prefix among
    // the parent's children (Curator's protected mode); if it is not there, create again.
    find_ours,
    // A transient failure (connection lost, request timed out): wait for the client to reconnect
    // and go back to `resume_`. Past `patience_` or once the session is gone, fail; if a create
    // may have been applied, leave its node to the session's background deleter.
    ride_out,
    created,  // done: created_ holds our node
    failed,   // done: rc_ says why
  };

  protected_create(session& s, const lock_node_request& request, clock::time_point patience)
      : s_(s), request_(request), prefix_(node_prefix(request.uuid, request.node_name)), patience_(patience) {}

  int run(lock_node& created) {
    while (state_ != state::created && state_ != state::failed) state_ = next();
    if (state_ == state::created) created = std::move(created_);
    return state_ == state::created ? ZOK : rc_;
  }

 private:
  static constexpr int max_parent_remakes = 3;

  // The one transition function: performs the current state's request, returns the next state.
  state next() {
    switch (state_) {
      case state::create: {
        request::created_node made;
        rc_ = request::create(s_, request_.parent + "/" + prefix_, request_.data, request_.acl,
                              ZOO_EPHEMERAL_SEQUENTIAL, patience_, &made);
        if (rc_ == ZOK) return found(made.path, made.stat.czxid);
        if (rc_ == ZNONODE && parents_made_++ < max_parent_remakes) return state::make_parents;
        return after_failure(state::find_ours);  // a lost reply: the create may have been applied
      }
      case state::make_parents:
        rc_ = ensure_parents(s_, request_, patience_);
        return rc_ == ZOK ? state::create : after_failure(state::create);
      case state::find_ours: return find_ours();
      case state::ride_out:
        if (ride_out_disconnect(s_, patience_)) return resume_;
        if (s_.expired()) {
          rc_ = ZSESSIONEXPIRED;  // the caller starts a fresh session
        } else if (resume_ == state::find_ours) {
          s_.delete_in_background(request_.parent, prefix_);
        }
        return state::failed;
      case state::created:
      case state::failed: break;
    }
    return state_;
  }

  // rc_ failed the request of a state: ride out a transient failure, then go to `resume`.
  state after_failure(state resume) {
    if (!transient_failure(rc_)) return state::failed;
    resume_ = resume;
    return state::ride_out;
  }

  state find_ours() {
    std::vector<std::string> children;
    rc_ = request::children(s_, request_.parent, patience_, children);
    if (rc_ != ZOK && rc_ != ZNONODE) return after_failure(state::find_ours);
    bool look_failed = false;
    for (const auto& child : children) {
      if (!child.starts_with(prefix_)) continue;
      Stat st{};
      rc_ = request::exists(s_, request_.parent + "/" + child, patience_, &st);
      if (rc_ == ZOK) return found(child, st.czxid);
      if (rc_ != ZNONODE) look_failed = true;  // (no node: deleted meanwhile, by an operator)
    }
    // The look itself failed: look again after the reconnect. Else the lost create never happened.
    return look_failed ? after_failure(state::find_ours) : state::create;
  }

  state found(const std::string& path, std::int64_t czxid) {
    created_.name = path.substr(path.rfind('/') + 1);
    created_.czxid = czxid;
    return state::created;
  }

  session& s_;
  const lock_node_request& request_;
  const std::string prefix_;
  const clock::time_point patience_;
  state state_ = state::create;
  state resume_ = state::create;  // where ride_out goes back to
  int rc_ = ZOK;
  int parents_made_ = 0;
  lock_node created_;
};

}  // namespace

int create_lock_node(session& s, const lock_node_request& request, clock::time_point patience, lock_node& created) {
  return protected_create(s, request, patience).run(created);
}

int create_lock_node_in_live_session(connection& conn, std::shared_ptr<session>& s, lock_node_request& request,
                                     clock::time_point patience, lock_node& created) {
  int rc = create_lock_node(*s, request, patience, created);
  if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) {
    conn.discard(s);
    s = conn.live(patience, acquire_waited);
    request.uuid = spi::random_uuid();
    rc = create_lock_node(*s, request, patience, created);
  }
  return rc;
}

}  // namespace dlock::zookeeper
