#pragma once
// Creating the lock node a waiter queues with: Curator's protected create (ephemeral sequential,
// named after our UUID), written as an explicit state machine in node_creation.cpp.
#include <chrono>
#include <cstdint>
#include <string>

#include "session.hpp"

namespace dlock::zookeeper {

struct lock_node_request {
  std::string root;    // "/dlock": persistent nodes, made when missing
  std::string parent;  // "<root>/<mapped name>": container nodes, made when missing
  std::string uuid;    // the protected prefix is "_c_<uuid>-lock-"
  std::string data;    // the node's content: the lock object's owner id
  const ACL_vector* acl = nullptr;
};

struct lock_node {
  std::string name;  // "_c_<uuid>-lock-0000000042", without the parent
  std::int64_t czxid = 0;
};

// ZOK with `created` filled, or the ZooKeeper code it failed with: ZSESSIONEXPIRED once the session
// is gone (start a fresh one), a transient code when no server answered before `patience` (a node
// that may have been created is then deleted in the background), any other code as the server said.
int create_lock_node(session& s, const lock_node_request& request, std::chrono::steady_clock::time_point patience,
                     lock_node& created);

}  // namespace dlock::zookeeper
