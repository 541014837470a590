#pragma once
// One grant of memcached:// (the lease) and the watchdog's renewal of many grants at once.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "ascii_pipeline.hpp"
#include "client_pool.hpp"
#include "dlock/spi.hpp"

namespace dlock::memcached {

class memcached_renewals;

class memcached_lease final : public spi::lease_state {
 public:
  memcached_lease(std::shared_ptr<client_pool> pool, std::shared_ptr<memcached_renewals> renewals, key_layout keys,
                  std::string token, std::string name, std::chrono::milliseconds ttl, clock::time_point valid_until,
                  std::uint64_t fence, std::uint64_t cas);

  std::optional<std::uint64_t> fencing_token() const noexcept override { return fence_; }
  spi::renewal_batch* batch() const noexcept override;

 protected:
  // Compare-and-delete: a `cas` store of the item with an expiry in the past, so an item replaced
  // since we learnt its CAS unique is left alone.
  void do_release(std::error_code& ec) noexcept override;
  // The same `cas` store with the new expiry. valid_until moves in the core once this succeeds.
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  friend class memcached_renewals;
  bool store_if_ours(time_t exptime, std::string_view what, std::error_code& ec) noexcept;

  std::shared_ptr<client_pool> pool_;
  std::shared_ptr<memcached_renewals> renewals_;
  key_layout keys_;
  std::string token_;
  std::uint64_t fence_;
  // The item's CAS unique as last seen (0: unknown, e.g. after a `cas` store, whose reply does not
  // give the new one). Saves the `gets` before a release or renewal; a stale value only makes the
  // `cas` answer EXISTS, and the `gets` + compare + `cas` path decides then.
  std::atomic<std::uint64_t> known_cas_;
};

// The watchdog's renewals of many leases of one backend (spi::renewal_batch): per server, a
// `cas ... noreply` store of each lease's item with the CAS unique it last saw, then `gets` of
// those keys, all in one write on a connection of its own (ascii_pipeline) that tells each lease whether its
// store was applied (its token under a new CAS unique, which it keeps for the next one). One
// round trip per server for the whole batch instead of two per lease (a lease that does not know
// its CAS unique adds one `gets` before the stores); each lease's outcome is what its own
// renewal would give.
class memcached_renewals final : public spi::renewal_batch {
 public:
  memcached_renewals(std::shared_ptr<client_pool> pool, std::chrono::milliseconds connect_timeout,
                     std::chrono::milliseconds io_timeout)
      : pool_(std::move(pool)), connect_timeout_(connect_timeout), io_timeout_(io_timeout) {}
  void renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept override;

 private:
  ascii_pipeline& pipeline_to(const memcached_instance_st* server);

  std::shared_ptr<client_pool> pool_;
  std::chrono::milliseconds connect_timeout_, io_timeout_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<ascii_pipeline>> pipelines_;  // by "host:port", one per server
};

}  // namespace dlock::memcached
