#include "layout.hpp"

#include <algorithm>

#include "dlock/error.hpp"
#include "requests.hpp"

namespace dlock::etcd {

key_kind kind_of_key(std::string_view rest) {
  const auto under = [&](std::string_view folder) {
    return rest.starts_with(folder) && rest.find('/', folder.size()) == std::string_view::npos;
  };
  if (under(read_folder)) return key_kind::read;
  if (under(write_folder)) return key_kind::write;
  if (under(semaphore_folder)) return key_kind::semaphore;
  return rest.find('/') == std::string_view::npos ? key_kind::mutex : key_kind::foreign;
}

json semaphore_keys(const std::string& folder) {
  const auto begin = folder + std::string(semaphore_folder);
  return {{"key", base64_encode(begin)}, {"range_end", base64_encode(prefix_end(begin))}, {"count_only", true}};
}

json lock_keys_before_semaphores(const std::string& folder) {
  return {{"key", base64_encode(folder)},
          {"range_end", base64_encode(folder + std::string(semaphore_folder))},
          {"keys_only", true},
          {"limit", "1"}};
}

json lock_keys_after_semaphores(const std::string& folder) {
  return {{"key", base64_encode(prefix_end(folder + std::string(semaphore_folder)))},
          {"range_end", base64_encode(prefix_end(folder))},
          {"keys_only", true},
          {"limit", "1"}};
}

void refuse_if_semaphore(const json& txn, std::size_t at, std::string_view name, std::string_view what) {
  const auto keys = int64_field(txn_range(txn, at), "count");
  if (keys == 0) return;
  throw error(errc::name_conflict, "etcd: lock '" + std::string(name) + "' is in use as a semaphore (" +
                                       std::to_string(keys) + (keys == 1 ? " acquire" : " acquires") +
                                       " holding or waiting for permits on the server); " + std::string(what) +
                                       " of the same name cannot be taken: use another name");
}

void refuse_if_lock(const json& txn, std::size_t at, const std::string& folder, std::string_view name) {
  std::int64_t keys = 0;
  bool reader_writer = false;
  for (std::size_t i = at; i < at + 2; ++i) {
    const auto& range = txn_range(txn, i);
    keys += int64_field(range, "count");
    for (const auto& kv : range_kvs(range)) {
      const auto key = base64_decode(kv.value("key", ""));
      const auto kind = kind_of_key(std::string_view(key).substr(std::min(folder.size(), key.size())));
      if (kind == key_kind::read || kind == key_kind::write) reader_writer = true;
    }
  }
  if (keys == 0) return;
  throw error(errc::name_conflict,
              "etcd: semaphore '" + std::string(name) + "' is in use as a " +
                  (reader_writer ? "reader-writer lock" : "mutex") + " (" + std::to_string(keys) +
                  (keys == 1 ? " holder or waiter" : " holders or waiters") +
                  " on the server); a semaphore of the same name cannot be taken: use another name");
}

std::string semaphore_value(const semaphore_entry& e) {
  return json{{"owner", e.owner}, {"permits", e.permits}, {"max_count", e.max_count}}.dump();
}

semaphore_entry parse_semaphore_value(std::string_view value) {
  semaphore_entry e;
  const auto j = json::parse(value, nullptr, false);
  if (!j.is_object()) {
    e.owner = std::string(value);
    return e;
  }
  try {
    e.owner = j.value("owner", "");
    e.permits = std::max<std::uint32_t>(1, j.value("permits", 1u));
    e.max_count = j.value("max_count", 0u);
  } catch (const json::exception&) {  // another client's value: one permit, its max_count unknown
    e = semaphore_entry{};
  }
  return e;
}

}  // namespace dlock::etcd
