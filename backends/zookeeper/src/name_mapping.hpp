#pragma once
// Lock name -> ZooKeeper folder (README: the name mapping). A pure function: tested without a
// server.
#include <string>
#include <string_view>

namespace dlock::zookeeper {

// The per-name parent path for `name` under `root`: "<root>/<name>" as Curator names it when that
// is a path ZooKeeper can store, else "<root>/#<head>.<sha256>".
std::string parent_path(const std::string& root, std::string_view name);

}  // namespace dlock::zookeeper
