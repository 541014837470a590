#pragma once
// Creating the lock node a waiter queues with: Curator's protected create (ephemeral sequential,
// named after our UUID), written as an explicit state machine in node_creation.cpp.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "connection.hpp"
#include "sequence.hpp"
#include "session.hpp"

namespace dlock::zookeeper {

struct lock_node_request {
  std::string root;                              // "/dlock": persistent nodes, made when missing
  std::string parent;                            // "<root>/<mapped name>": container nodes, made when missing
  std::string uuid;                              // the protected prefix is "_c_<uuid>-<node_name>"
  std::string_view node_name = mutex_node_name;  // "lock-", "__READ__", "__WRIT__", "lease-", "latch-"
  std::string data;                              // the node's content: the lock object's owner id
  const ACL_vector* acl = nullptr;
};

struct lock_node {
  std::string name;  // "_c_<uuid>-lock-0000000042" (or another node name), without the parent
  std::int64_t czxid = 0;
};

// How a session that is not established in time says what it waited for.
inline constexpr std::string_view acquire_waited = "by the acquire's deadline";

// ZOK with `created` filled, or the ZooKeeper code it failed with: ZSESSIONEXPIRED once the session
// is gone (start a fresh one), a transient code when no server answered before `patience` (a node
// that may have been created is then deleted in the background), any other code as the server said.
// No request is waited for past `patience`.
int create_lock_node(session& s, const lock_node_request& request, std::chrono::steady_clock::time_point patience,
                     lock_node& created);

// create_lock_node in `s`; when the server says that session expired before its event reached us,
// once more (with a fresh uuid) in a fresh session of `conn`, which `s` then is.
int create_lock_node_in_live_session(connection& conn, std::shared_ptr<session>& s, lock_node_request& request,
                                     std::chrono::steady_clock::time_point patience, lock_node& created);

}  // namespace dlock::zookeeper
