#include "queue.hpp"

#include "dlock/acquire_deadline.hpp"
#include "dlock/error.hpp"
#include "etcd_lock.hpp"
#include "requests.hpp"

namespace dlock::etcd {

namespace {

using clock = std::chrono::steady_clock;

// One entry, kept until granted or until the deadline (min(): a try, which never waits).
std::unique_ptr<spi::lease_state> attempt(const queue_context& q, const queue_entry& e, clock::time_point deadline) {
  auto& gw = *q.gw;
  const auto start = clock::now();
  const auto lease = grant(gw, ttl_seconds(q.ttl));
  const std::chrono::milliseconds ttl = std::chrono::seconds(lease.seconds);
  const auto key = e.key_for(lease.id);
  try {
    json success = json::array(
        {{{"request_put",
           {{"key", base64_encode(key)}, {"value", base64_encode(e.value())}, {"lease", std::to_string(lease.id)}}}}});
    for (const auto& range : e.checks()) success.push_back({{"request_range", range}});
    const json txn = {
        {"compare",
         json::array(
             {{{"key", base64_encode(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
        {"success", std::move(success)}};
    const auto r = gw.call("/v3/kv/txn", txn);
    // A fresh lease's id names no key yet: a key already there is another client's, not ours to use.
    if (!r.value("succeeded", false))
      throw error(errc::backend_error, "etcd: the key " + key + " exists already (put there by another client?)");
    e.check_created(r);
    const std::int64_t mine = int64_field(r["header"], "revision");
    auto kept_alive_at = start;
    while (true) {
      const auto seen = e.look(gw, key, mine);
      if (seen.granted)
        return std::make_unique<etcd_lease>(q.gw, q.name, ttl, spi::lease_state::validity_after(kept_alive_at, ttl),
                                            lease.id, key, mine);
      if (clock::now() >= deadline) break;
      // From the revision after the look's read, where every deletion we wait for lies.
      const auto end =
          gw.wait_deleted_in(seen.watch_key, seen.watch_range_end, seen.read_revision + 1, deadline, ttl / 3, [&] {
            const auto sent = clock::now();
            if (keep_alive(gw, lease.id) <= 0) throw place_lost{};
            kept_alive_at = sent;
          });
      if (end == watch_end::stopped) break;
      if (end == watch_end::deadline) deadline = clock::time_point::min();  // one last look, then withdraw
    }
  } catch (...) {
    revoke_quietly(gw, lease.id);
    throw;
  }
  revoke_quietly(gw, lease.id);  // not granted: our key goes with our lease
  return nullptr;
}

}  // namespace

std::unique_ptr<spi::lease_state> try_entry(const queue_context& q, const queue_entry& e,
                                            std::error_code& ec) noexcept {
  return guarded(ec, [&]() -> std::unique_ptr<spi::lease_state> {
    try {
      return attempt(q, e, clock::time_point::min());
    } catch (const place_lost&) {  // our lease expired between the put and the look
      return nullptr;
    }
  });
}

std::unique_ptr<spi::lease_state> wait_entry(const queue_context& q, const queue_entry& e, clock::time_point deadline,
                                             std::error_code& ec) noexcept {
  return spi::wait_out_outages(deadline, q.poll, ec, [&](clock::time_point until, std::error_code& err) {
    return guarded(err, [&] {
      while (true) {
        try {
          return attempt(q, e, until);
        } catch (const place_lost&) {  // our lease expired while we waited: queue again with a new one
        }
      }
    });
  });
}

json read_line(gateway& gw, const std::vector<json>& ranges, const std::string& key, std::int64_t mine) {
  json success = json::array();
  for (const auto& range : ranges) success.push_back({{"request_range", range}});
  success.push_back({{"request_range", {{"key", base64_encode(key)}}}});
  auto r = gw.call("/v3/kv/txn", {{"success", std::move(success)}});
  if (first_create_revision(txn_range(r, ranges.size())) != mine) throw place_lost{};
  return r;
}

}  // namespace dlock::etcd
