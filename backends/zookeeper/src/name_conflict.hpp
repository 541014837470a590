#pragma once
// One name, one lock: a semaphore of a name never holds beside a mutex or a reader-writer lock of
// that name. Their nodes live in different folders (Curator's layouts: the mutex's and the
// reader-writer lock's in <path>, a semaphore's leases in <path>/leases), so no single request can
// check both. Each acquirer creates its own node(s) first, then reads the other kind's folder, and
// withdraws when it finds a node there. ZooKeeper applies every create in one order (the zxid),
// and a session's read is answered after its own earlier create, by a server that has applied
// every transaction up to that create (a lagging follower included): of two acquirers of different
// kinds, the one whose create came later sees the other's node. Both may be refused; never both
// granted. Pure functions: tested without a server.
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper {

// <path>/leases: the folder whose children are a semaphore's permits, held or wanted.
std::string leases_folder(const std::string& path);

// What the contenders among the children of a name's folder make the name: "mutex" (dlock's,
// Curator's InterProcessMutex, kazoo's Lock or WriteLock), "reader-writer lock" (Curator's
// __READ__/__WRIT__ nodes, kazoo's ReadLock), or "" when there is none.
std::string_view lock_kind_of(const std::vector<std::string>& children);

// The messages of errc::name_conflict. `what`: "a mutex", "a read lock", "a write lock".
std::string in_use_as_semaphore(std::string_view name, std::size_t lease_nodes, std::string_view what);
std::string in_use_as_lock(std::string_view name, std::string_view kind, std::size_t lock_nodes);

}  // namespace dlock::zookeeper
