#include "name_conflict.hpp"

#include "sequence.hpp"

namespace dlock::zookeeper {

std::string leases_folder(const std::string& path) { return path + "/leases"; }

std::string_view lock_kind_of(const std::vector<std::string>& children) {
  std::string_view kind;
  for (const auto& child : children) {
    if (!sequence_of(child)) continue;  // the semaphore's own folders, nested names, foreign nodes
    if (is_read_node(child) || child.find(write_node_name) != std::string::npos) return "reader-writer lock";
    kind = "mutex";  // kazoo's WriteLock node reads as a Lock's: both are "__lock__"
  }
  return kind;
}

std::string in_use_as_semaphore(std::string_view name, std::size_t lease_nodes, std::string_view what) {
  return "zookeeper: lock '" + std::string(name) + "' is in use as a semaphore (" + std::to_string(lease_nodes) +
         (lease_nodes == 1 ? " permit" : " permits") + " held or wanted on the server); " + std::string(what) +
         " of the same name cannot be taken: use another name";
}

std::string in_use_as_lock(std::string_view name, std::string_view kind, std::size_t lock_nodes) {
  return "zookeeper: semaphore '" + std::string(name) + "' is in use as a " + std::string(kind) + " (" +
         std::to_string(lock_nodes) + (lock_nodes == 1 ? " holder or waiter" : " holders or waiters") +
         " on the server); a semaphore of the same name cannot be taken: use another name";
}

}  // namespace dlock::zookeeper
