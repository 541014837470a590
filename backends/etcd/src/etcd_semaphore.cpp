// The semaphore. etcd's recipes have none; this one keeps the mutex's line: an acquire of k permits
// is one key under <name>/semaphore/ (valued with its owner, k and max_count), and it holds when
// the permits of the keys created up to its own, its own included, are at most max_count. Keys
// only join the line behind the newest holder, so the holders' permits stay within max_count: the
// newest holder counted every other holder's key. A waiter watches the deletion of any key of the
// semaphore (a holder's release, a waiter's withdrawal), then looks again. Every key records its
// max_count, and an acquire whose max_count differs from a key before it is refused.
#include <utility>

#include "dlock/error.hpp"
#include "layout.hpp"
#include "primitives.hpp"
#include "queue.hpp"
#include "requests.hpp"

namespace dlock::etcd {

namespace {

class permits_entry final : public queue_entry {
 public:
  permits_entry(const std::string& folder, std::string_view name, const std::string& owner, std::uint32_t permits,
                std::uint32_t max_count)
      : folder_(folder),
        permits_folder_(folder + std::string(semaphore_folder)),
        name_(name),
        entry_{owner, permits, max_count} {}

  std::string key_for(std::int64_t lease_id) const override { return permits_folder_ + hex_of(lease_id); }
  std::string value() const override { return semaphore_value(entry_); }
  json checks() const override {
    return json::array({lock_keys_before_semaphores(folder_), lock_keys_after_semaphores(folder_)});
  }
  void check_created(const json& txn) const override { refuse_if_lock(txn, 1, folder_, name_); }

  queue_look look(gateway& gw, const std::string& key, std::int64_t mine) const override {
    // The first max_count keys of the line up to ours (the range's count would not do: etcd counts
    // the whole range, before max_create_revision filters it).
    const json line = {{"key", base64_encode(permits_folder_)},
                       {"range_end", base64_encode(prefix_end(permits_folder_))},
                       {"sort_order", "ASCEND"},
                       {"sort_target", "CREATE"},
                       {"limit", std::to_string(entry_.max_count)},
                       {"max_create_revision", std::to_string(mine)}};
    const auto r = read_line(gw, {line}, key, mine);
    const auto& range = txn_range(r, 0);
    std::uint64_t permits = 0;
    bool ours_counted = false;  // not among the first max_count: more keys than permits before it
    for (const auto& kv : range_kvs(range)) {
      if (int64_field(kv, "create_revision") == mine) ours_counted = true;
      const auto e = parse_semaphore_value(base64_decode(kv.value("value", "")));
      if (e.max_count != 0 && e.max_count != entry_.max_count)
        throw error(errc::name_conflict, "etcd: semaphore '" + std::string(name_) + "' is in use with max_count " +
                                             std::to_string(e.max_count) + " (by '" + e.owner + "'), not " +
                                             std::to_string(entry_.max_count) +
                                             ": every process must use the same max_count for a name");
      permits += e.permits;
    }
    queue_look seen;
    seen.read_revision = int64_field(r["header"], "revision");
    seen.granted = ours_counted && permits <= entry_.max_count;
    seen.watch_key = permits_folder_;
    seen.watch_range_end = prefix_end(permits_folder_);
    return seen;
  }

 private:
  const std::string& folder_;
  std::string permits_folder_;
  std::string_view name_;
  semaphore_entry entry_;
};

class etcd_semaphore final : public semaphore {
 public:
  etcd_semaphore(std::string name, std::uint32_t max_count, capabilities caps, lock_options options,
                 std::shared_ptr<gateway> gw, std::string folder)
      : semaphore(std::move(name), max_count, caps, std::move(options)),
        gw_(std::move(gw)),
        folder_(std::move(folder)) {}

 protected:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    return try_entry(context(), permits_entry(folder_, name(), owner(), permits, max_count()), ec);
  }
  std::unique_ptr<spi::lease_state> do_acquire_until(std::uint32_t permits, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return wait_entry(context(), permits_entry(folder_, name(), owner(), permits, max_count()), deadline, ec);
  }

 private:
  queue_context context() const { return {gw_, std::string(name()), options().ttl, options().poll}; }

  std::shared_ptr<gateway> gw_;
  std::string folder_;
};

}  // namespace

std::unique_ptr<semaphore> make_semaphore(std::string name, std::uint32_t max_count, capabilities caps,
                                          lock_options options, std::shared_ptr<gateway> gw, std::string folder) {
  return std::make_unique<etcd_semaphore>(std::move(name), max_count, caps, std::move(options), std::move(gw),
                                          std::move(folder));
}

}  // namespace dlock::etcd
