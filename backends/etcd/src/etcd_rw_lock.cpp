// The reader-writer lock: Go's contrib recipe RWMutex (client/v3/experimental/recipes) in its keys
// and its waits. A writer holds when no key of the name was created before its own, and waits for
// the deletion of the last one that was; a reader holds when no key but readers' was created
// before its own, and waits for the last such key. A waiting writer's key is in the line, so a
// reader that comes after it waits for it: writer_preferred. The mutex of the name (its keys in the
// same folder) is a writer to both.
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "layout.hpp"
#include "primitives.hpp"
#include "queue.hpp"
#include "requests.hpp"

namespace dlock::etcd {

namespace {

class side_entry final : public queue_entry {
 public:
  side_entry(access side, const std::string& folder, std::string_view name, const std::string& owner)
      : side_(side), folder_(folder), name_(name), owner_(owner) {}

  std::string key_for(std::int64_t lease_id) const override {
    return folder_ + std::string(side_ == access::read ? read_folder : write_folder) + hex_of(lease_id);
  }
  std::string value() const override { return owner_; }
  json checks() const override { return json::array({semaphore_keys(folder_)}); }
  void check_created(const json& txn) const override {
    refuse_if_semaphore(txn, 1, name_, side_ == access::read ? "a read lock" : "a write lock");
  }

  queue_look look(gateway& gw, const std::string& key, std::int64_t mine) const override {
    std::vector<json> ranges;
    if (side_ == access::write) {
      ranges.push_back(last_created_below(folder_, mine));
    } else {  // every key but the readers': the ranges before and after read/
      const auto readers = folder_ + std::string(read_folder);
      ranges.push_back(last_created_below(folder_, readers, mine));
      ranges.push_back(last_created_below(prefix_end(readers), prefix_end(folder_), mine));
    }
    const auto r = read_line(gw, ranges, key, mine);
    queue_look seen;
    seen.read_revision = int64_field(r["header"], "revision");
    std::int64_t last = 0;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const auto& kvs = range_kvs(txn_range(r, i));
      if (kvs.empty()) continue;
      if (const auto created = int64_field(kvs[0], "create_revision"); created > last) {
        last = created;
        seen.watch_key = base64_decode(kvs[0].value("key", ""));
      }
    }
    seen.granted = last == 0;
    return seen;
  }

 private:
  access side_;
  const std::string& folder_;
  std::string_view name_;
  const std::string& owner_;
};

class etcd_rw_lock final : public rw_lock {
 public:
  etcd_rw_lock(std::string name, capabilities caps, lock_options options, std::shared_ptr<gateway> gw,
               std::string folder)
      : rw_lock(std::move(name), caps, std::move(options)), gw_(std::move(gw)), folder_(std::move(folder)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    return try_entry(context(), side_entry(side, folder_, name(), owner()), ec);
  }
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_entry(context(), side_entry(side, folder_, name(), owner()), deadline, ec);
  }

 private:
  queue_context context() const { return {gw_, std::string(name()), options().ttl, options().poll}; }

  std::shared_ptr<gateway> gw_;
  std::string folder_;
};

}  // namespace

std::unique_ptr<rw_lock> make_rw_lock(std::string name, capabilities caps, lock_options options,
                                      std::shared_ptr<gateway> gw, std::string folder) {
  return std::make_unique<etcd_rw_lock>(std::move(name), caps, std::move(options), std::move(gw), std::move(folder));
}

}  // namespace dlock::etcd
