#pragma once
// Curator InterProcessMutex node names and their order. Pure functions: unit-tested without a server.
//
// A lock node is  <parent>/_c_<36-char UUID>-lock-<10 digits>  (Curator's protected ephemeral
// sequential create with lock name "lock-"). Other recipes queue in the same folder under other
// names, and each of their nodes excludes an exclusive lock holder just as ours do: dlock's lock is
// exclusive, so every one of them is a contender, ordered with ours by its sequence number:
//   Curator InterProcessMutex              _c_<uuid>-lock-<seq>
//   Curator InterProcessReadWriteLock      _c_<uuid>-__READ__<seq>, _c_<uuid>-__WRIT__<seq>
//   Curator LeaderLatch (dlock's election) _c_<uuid>-latch-<seq>
//   kazoo Lock / WriteLock, ReadLock       <hex uuid>__lock__<seq>, <hex uuid>__rlock__<seq>
// (kazoo's contender rule is the regex (?:__lock__|__rlock__)(-?\d{10})$.) ZooKeeper's sequence is the parent's
// cversion, a signed 32-bit counter printed with %010d: after 2147483647 it wraps to -2147483648 (printed
// "-2147483648"). Sorting the numbers as plain integers would put the wrapped (newest) nodes first;
// we order by serial-number arithmetic instead: a precedes b iff int32(b - a) > 0, which is a
// correct total order whenever the live nodes span less than 2^31 sequence numbers (always: one
// parent cannot hold 2^31 children).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper {

inline constexpr std::string_view lock_marker = "-lock-";    // the text before the sequence number
inline constexpr std::string_view protected_prefix = "_c_";  // Curator's protected-mode prefix

// Curator's node names (the name given to the protected create, after "_c_<uuid>-"): the mutex's,
// InterProcessReadWriteLock's two sides (the same length: Curator relies on it) and
// InterProcessSemaphoreV2's lease nodes (in <path>/leases, its internal mutex in <path>/locks).
inline constexpr std::string_view mutex_node_name = "lock-";
inline constexpr std::string_view read_node_name = "__READ__";
inline constexpr std::string_view write_node_name = "__WRIT__";
inline constexpr std::string_view lease_node_name = "lease-";
// Curator LeaderLatch's node name: an election's candidates queue as "_c_<uuid>-latch-<seq>", the
// leader first. A candidate excludes the mutex of the same name as a lock node does.
inline constexpr std::string_view latch_node_name = "latch-";

// "_c_<uuid>-<node name>" ("_c_<uuid>-lock-" for the mutex): what we pass to create; ZooKeeper
// appends the 10-digit sequence.
inline std::string node_prefix(std::string_view uuid, std::string_view node_name = mutex_node_name) {
  return std::string(protected_prefix) + std::string(uuid) + "-" + std::string(node_name);
}

// The text right before the sequence number of a contender node, one per known recipe (above).
inline constexpr std::string_view contender_markers[] = {"lock-",  "__READ__", "__WRIT__",
                                                         "latch-", "__lock__", "__rlock__"};

// "0000000042" or "-2147483648" as the int32 ZooKeeper printed with %010d; nullopt otherwise.
inline std::optional<std::int32_t> parse_sequence(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  std::int64_t value = 0;
  bool negative = false;
  std::size_t i = 0;
  if (digits[0] == '-') {
    negative = true;
    i = 1;
  }
  if (i == digits.size()) return std::nullopt;
  for (; i < digits.size(); ++i) {
    if (digits[i] < '0' || digits[i] > '9') return std::nullopt;
    value = value * 10 + (digits[i] - '0');
    if (value > 2147483648LL) return std::nullopt;
  }
  if (negative) value = -value;
  if (value > 2147483647LL || value < -2147483648LL) return std::nullopt;
  return static_cast<std::int32_t>(value);
}

// The sequence number of a contender node (one whose name ends in a known recipe's marker followed
// by the sequence), or nullopt for any other child (a nested folder, a foreign node).
inline std::optional<std::int32_t> sequence_of(std::string_view child) {
  for (const auto marker : contender_markers) {
    const auto at = child.rfind(marker);
    if (at == std::string_view::npos) continue;
    if (auto sequence = parse_sequence(child.substr(at + marker.size()))) return sequence;
  }
  return std::nullopt;
}

// True for a contender that only shares the lock with other readers: Curator's read node and
// kazoo's ReadLock node. Every other contender (any recipe's mutex or write node) is exclusive.
inline bool is_read_node(std::string_view child) {
  for (const auto marker : {read_node_name, std::string_view("__rlock__")}) {
    const auto at = child.rfind(marker);
    if (at != std::string_view::npos && parse_sequence(child.substr(at + marker.size()))) return true;
  }
  return false;
}

// a before b in arrival order, across the wrap.
inline bool sequence_before(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(b) - static_cast<std::uint32_t>(a)) > 0;
}

// The contender nodes among `children` (any recipe's), in arrival order (the first one holds the lock).
inline std::vector<std::string> lock_nodes_in_order(const std::vector<std::string>& children) {
  std::vector<std::pair<std::int32_t, std::string>> nodes;
  for (const auto& c : children)
    if (auto s = sequence_of(c)) nodes.emplace_back(*s, c);
  // The comparator is a total order only within one half of the ring, so sort relative to the
  // smallest element in serial order: offset = seq - min (mod 2^32) is an ordinary unsigned order.
  if (nodes.empty()) return {};
  std::int32_t first = nodes.front().first;
  for (const auto& n : nodes)
    if (sequence_before(n.first, first)) first = n.first;
  std::sort(nodes.begin(), nodes.end(), [first](const auto& x, const auto& y) {
    return static_cast<std::uint32_t>(x.first) - static_cast<std::uint32_t>(first) <
           static_cast<std::uint32_t>(y.first) - static_cast<std::uint32_t>(first);
  });
  std::vector<std::string> out;
  out.reserve(nodes.size());
  for (auto& n : nodes) out.push_back(std::move(n.second));
  return out;
}

}  // namespace dlock::zookeeper
