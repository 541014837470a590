#pragma once
// etcd:// backend: Go's concurrency.Mutex layout (the one `etcdctl lock NAME` uses), one etcd lease
// per grant:
//   key    <prefix><name>/<lease id, lower-case hex>, put with the lease in a transaction that
//          creates it only if absent (create_revision == 0); its value is the lock's owner id (Go's
//          Mutex puts an empty value and reads only create revisions, so both still share a name)
//   holder the key with the lowest create revision under <prefix><name>/
//   wait   watch the deletion of the key with the largest create revision below ours, then read
//          again: the holder check is repeated, and our own key must still be there (a lease that
//          expired while we waited has lost its place)
//   fence  our key's create revision
// The name's reader-writer lock and semaphore keep their keys in the same folder (layout.hpp): the
// mutex waits for a reader's or writer's key as for another mutex's, and refuses the name
// (errc::name_conflict) while a semaphore's key is there.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/spi.hpp"
#include "gateway.hpp"

namespace dlock::etcd {

// Where a name's keys live: the name itself when it contains no '/', else a hashed key (a '/' in a
// name would put its keys under a shorter name's prefix, and the shorter name would count them).
std::string name_prefix(const std::string& uri_prefix, const std::string& name);

// etcd counts a lease's TTL in whole seconds: a ttl is rounded up.
std::int64_t ttl_seconds(std::chrono::milliseconds ttl) noexcept;

class etcd_lease final : public spi::lease_state {
 public:
  etcd_lease(std::shared_ptr<gateway> gw, std::string name, std::chrono::milliseconds ttl,
             clock::time_point valid_until, std::int64_t lease_id, std::string key, std::int64_t revision);
  std::optional<std::uint64_t> fencing_token() const noexcept override { return static_cast<std::uint64_t>(revision_); }
  std::int64_t lease_id() const noexcept { return lease_id_; }
  const std::string& key() const noexcept { return key_; }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<gateway> gw_;
  std::int64_t lease_id_;
  std::string key_;
  std::int64_t revision_;
};

// The lease id of a grant of this backend, or 0 (for the tests' saboteur).
std::int64_t lease_id_of(const spi::lease_state& state) noexcept;

class etcd_backend final : public backend {
 public:
  etcd_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  lock_info do_inspect(const std::string& name) override;
  std::vector<std::string> do_list(const std::string& prefix) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::shared_ptr<gateway> gw_;
  std::string prefix_;
};

}  // namespace dlock::etcd
