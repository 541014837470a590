#pragma once
// Curator InterProcessMutex node names and their order. Pure functions: unit-tested without a server.
//
// A lock node is  <parent>/_c_<36-char UUID>-lock-<10 digits>  (Curator's protected ephemeral
// sequential create with lock name "lock-"). ZooKeeper's sequence is the parent's cversion, a
// signed 32-bit counter printed with %010d: after 2147483647 it wraps to -2147483648 (printed
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

inline constexpr std::string_view lock_marker = "-lock-";   // the text before the sequence number
inline constexpr std::string_view protected_prefix = "_c_";  // Curator's protected-mode prefix

// "_c_<uuid>-lock-" : what we pass to create; ZooKeeper appends the 10-digit sequence.
inline std::string node_prefix(std::string_view uuid) {
  return std::string(protected_prefix) + std::string(uuid) + std::string(lock_marker);
}

// The sequence number after the last "lock-", or nullopt for a child that is not a lock node.
inline std::optional<std::int32_t> sequence_of(std::string_view child) {
  const auto at = child.rfind("lock-");
  if (at == std::string_view::npos) return std::nullopt;
  const auto digits = child.substr(at + 5);
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

// a before b in arrival order, across the wrap.
inline bool sequence_before(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(b) - static_cast<std::uint32_t>(a)) > 0;
}

// The lock nodes among `children`, in arrival order (the first one holds the lock).
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
