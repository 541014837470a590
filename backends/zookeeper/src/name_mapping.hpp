#pragma once
// Lock name -> ZooKeeper folder (README: the name mapping). A pure function: tested without a
// server.
#include <string>
#include <string_view>

namespace dlock::zookeeper {

// The per-name parent path for `name` under `root`: "<root>/<name>" as Curator names it when that
// is a path ZooKeeper can store, else "<root>/#<head>.<sha256>".
std::string parent_path(const std::string& root, std::string_view name);

// True for a URI path ZooKeeper can store as the root of every lock: "" or "/a/b" with every
// component non-empty, not "." or "..", of characters ZooKeeper accepts (trailing '/' removed).
bool usable_root(std::string_view root);

// Why `name` cannot be a lock name under `root`, or "" when it can. A name starting with '/' is
// how Curator and kazoo users write a ZooKeeper path; dlock's names are paths below the URI's
// path. Such a name is refused (errc::invalid_name) with what to write instead, never hashed: its
// hashed folder would be a lock no peer on that path contends on.
std::string refusal(const std::string& root, std::string_view name);

}  // namespace dlock::zookeeper
